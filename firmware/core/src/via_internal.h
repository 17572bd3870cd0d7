/* Functions the VIA manager's source files share (not part of the firmware's interface). */
#ifndef NUMAVIA_VIA_INTERNAL_H
#define NUMAVIA_VIA_INTERNAL_H

#include <stdint.h>

#include "numavia/via.h"

uint64_t nv_via_deadline(const struct nv_via *via, uint32_t us);
int nv_via_expired(uint64_t deadline);
unsigned nv_via_vi_state(unsigned vi);
uint32_t nv_via_reset_vi(struct nv_via *via, unsigned vi);
int nv_via_vi_valid(const struct nv_via *via, uint32_t vi);
int nv_via_cq_valid(const struct nv_via *via, uint32_t cq); /* created, not destroyed */
int nv_via_host_range(const struct nv_via *via, uint32_t addr, uint32_t length);
uint32_t nv_via_set_desc_area(const struct nv_via *via, unsigned vi, uint32_t base, uint32_t size);
uint32_t nv_via_connection_command(struct nv_via *via, uint32_t code, uint32_t args[16]);
void nv_via_connection_timers(struct nv_via *via);

/* A field of up to 8 bytes at byte `offset` of a little-endian record held as 32-bit words
 * (descriptors, ATT entries, management messages: offsets from numavia_via.h). */
void nv_put_field(uint32_t *words, unsigned offset, unsigned bytes, uint64_t value);
uint64_t nv_get_field(const uint32_t *words, unsigned offset, unsigned bytes);

#endif
