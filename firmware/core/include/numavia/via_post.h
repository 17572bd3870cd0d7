/* Prebuilt descriptors: the low-latency post path of the firmware's VIA users.
 *
 * A descriptor a program posts again and again (a ping-pong's message, a protocol's header) is
 * written into host memory once, by nv_via_prebuild. A post then writes only what changes - the
 * first data segment's LENGTH when it differs from the last post's, and STATUS = 0 so that the
 * card's DONE is new - and rings the doorbell: two uncached writes instead of the whole descriptor
 * (sixteen words for an RDMA write), which is most of what a small message costs a 100 MHz CPU. A
 * send descriptor posted with nothing changed but STATUS rings SQ_REPOST: the card sends it from
 * the copy it kept of its last post, if it still holds one, without fetching it again (the build
 * writes FORGET_COPIES, so no copy of what was at `desc` before survives it); a post that changes
 * LENGTH rings SQ_DOORBELL, and the card fetches it.
 *
 * The descriptor belongs to the card from its post until its DONE is seen by nv_via_prebuilt_done:
 * posting it again before that is refused (NV_VIP_INVALID_STATE) and writes nothing, so a
 * descriptor in flight is never changed under the card. A descriptor outlives what it names when a
 * memory region is deregistered or a VI reset after it was built: it is then refused as
 * NV_VIP_STALE and must be built again. Anything that was not built by nv_via_prebuild (or has
 * been released) is refused as NV_VIP_INVALID_PARAMETER. No error writes host memory or a doorbell.
 *
 * Post and poll are inline: the timed loops that call them keep all their code in their own group
 * (NV_TIMED). */
#ifndef NUMAVIA_VIA_POST_H
#define NUMAVIA_VIA_POST_H

#include <stdint.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia/via.h"
#include "numavia_regs.h"
#include "numavia_via.h"

#define NV_VIA_PREBUILT_MAGIC 0x50524542u /* "PREB": set by nv_via_prebuild, cleared by release */

struct nv_via_prebuilt {
    uint32_t magic;
    uint32_t desc;       /* physical address of the descriptor in host memory */
    uint32_t doorbell;   /* card register a post that changes nothing rings: SQ_REPOST or RQ_DOORBELL */
    uint32_t length_at;  /* host address of the first data segment's LENGTH (0: no data segment) */
    uint32_t length;     /* what that LENGTH holds now */
    uint32_t generation; /* the manager's generation when it was built */
    uint8_t vi, posted;
    uint8_t repost; /* `doorbell` less this is the one a changed post rings: SQ_DOORBELL for a send */
};

/* Write the descriptor `words` (`count` 32-bit words: control segment, address segment of an RDMA,
 * data segments; STATUS is written 0) at `desc` in host memory and make `p` a prebuilt descriptor of
 * VI `vi`'s send (`send_queue`) or receive queue. NV_VIP_INVALID_PARAMETER (nothing written) for a
 * VI the card does not have, a misaligned or out-of-host-memory `desc`, or `words` that are not
 * one whole descriptor of at most the card's segments. */
uint32_t nv_via_prebuild(struct nv_via *via, struct nv_via_prebuilt *p, unsigned vi, int send_queue, uint32_t desc,
                         const uint32_t *words, unsigned count);

/* `p` no longer names a prebuilt descriptor (its memory may be reused); NV_VIP_INVALID_STATE while
 * it is posted and not seen done. */
uint32_t nv_via_prebuilt_release(struct nv_via_prebuilt *p);

static inline __attribute__((always_inline)) uint32_t nv_via_prebuilt_check(const struct nv_via *via,
                                                                            const struct nv_via_prebuilt *p)
{
    if (p == NULL || p->magic != NV_VIA_PREBUILT_MAGIC)
        return NV_VIP_INVALID_PARAMETER;
    if (p->generation != via->generation)
        return NV_VIP_STALE;
    return NV_VIP_SUCCESS;
}

/* What a poll of `p` needs: a prebuilt descriptor (nv_via_prebuilt_check) that is posted, else
 * NV_VIP_INVALID_STATE. */
static inline __attribute__((always_inline)) uint32_t nv_via_prebuilt_check_posted(const struct nv_via *via,
                                                                                   const struct nv_via_prebuilt *p)
{
    uint32_t result = nv_via_prebuilt_check(via, p);
    if (result == NV_VIP_SUCCESS && !p->posted)
        return NV_VIP_INVALID_STATE;
    return result;
}

/* Post `p` again with `length` bytes in its first data segment (ignored without one): a send
 * descriptor through SQ_REPOST unless LENGTH changes. */
static inline __attribute__((always_inline)) uint32_t nv_via_post_prebuilt(const struct nv_via *via,
                                                                           struct nv_via_prebuilt *p, uint32_t length)
{
    uint32_t result = nv_via_prebuilt_check(via, p);
    if (result != NV_VIP_SUCCESS)
        return result;
    if (p->posted)
        return NV_VIP_INVALID_STATE;
    uint32_t doorbell = p->doorbell;
    if (p->length_at && length != p->length) {
        nv_host_write32(p->length_at, length);
        p->length = length;
        doorbell -= p->repost; /* the card must fetch the new LENGTH */
    }
    nv_host_write32(p->desc + NV_DESC_CONTROL_STATUS_OFFSET, 0);
    nv_reg_write(doorbell, p->desc);
    p->posted = 1; /* after the doorbell: a store on the path to it costs a bus write */
    return NV_VIP_SUCCESS;
}

/* Poll `p` once: NV_VIP_NOT_DONE while the card has it; NV_VIP_SUCCESS when it completed (its
 * STATUS in `*status` if not NULL; error bits are the caller's to judge); NV_VIP_INVALID_STATE when
 * it is not posted. One uncached read of host memory. */
static inline __attribute__((always_inline)) uint32_t nv_via_prebuilt_done(const struct nv_via *via,
                                                                           struct nv_via_prebuilt *p, uint32_t *status)
{
    uint32_t result = nv_via_prebuilt_check_posted(via, p);
    if (result != NV_VIP_SUCCESS)
        return result;
    nv_host_sync();
    uint32_t s = nv_host_read32(p->desc + NV_DESC_CONTROL_STATUS_OFFSET);
    if (!(s & NV_DESC_CONTROL_STATUS_DONE_MASK))
        return NV_VIP_NOT_DONE;
    p->posted = 0;
    if (status)
        *status = s;
    return NV_VIP_SUCCESS;
}

/* Wait until `p` is done, up to `timeout_cycles` of the card's clock after the first poll that
 * missed: nv_via_prebuilt_done in a loop that checks `p` once, then reads only its STATUS (a poll
 * is one uncached read and a few instructions, and its period is how late a completion is seen).
 * NV_VIP_TIMEOUT if it never was; `*polls` grows by the reads made. */
static inline __attribute__((always_inline)) uint32_t nv_via_prebuilt_wait(const struct nv_via *via,
                                                                           struct nv_via_prebuilt *p,
                                                                           uint32_t timeout_cycles, uint32_t *status,
                                                                           uint32_t *polls)
{
    uint32_t result = nv_via_prebuilt_check_posted(via, p);
    if (result != NV_VIP_SUCCESS)
        return result;
    uint32_t at = p->desc + NV_DESC_CONTROL_STATUS_OFFSET, start = 0, s;
    for (uint32_t n = 1;; n++) {
        nv_host_sync();
        s = nv_host_read32(at);
        if (s & NV_DESC_CONTROL_STATUS_DONE_MASK) {
            *polls += n;
            break;
        }
        if (nv_poll_timed_out(n, &start, timeout_cycles)) {
            *polls += n;
            return NV_VIP_TIMEOUT;
        }
    }
    p->posted = 0;
    if (status)
        *status = s;
    return NV_VIP_SUCCESS;
}

#endif
