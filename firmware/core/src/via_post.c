/* Prebuilt descriptors (numavia/via_post.h): building and releasing them; posting and polling are
 * inline in the header. */
#include <stddef.h>

#include "numavia/via_post.h"
#include "via_internal.h"

_Static_assert(NV_DOORBELL_VI_SQ_REPOST > NV_DOORBELL_VI_SQ_DOORBELL &&
                   NV_DOORBELL_VI_SQ_REPOST - NV_DOORBELL_VI_SQ_DOORBELL < 256,
               "SQ_REPOST's offset from SQ_DOORBELL fits `repost`");

uint32_t nv_via_prebuild(struct nv_via *via, struct nv_via_prebuilt *p, unsigned vi, int send_queue, uint32_t desc,
                         const uint32_t *words, unsigned count)
{
    if (p == NULL || words == NULL || !nv_via_vi_valid(via, vi) || (desc & (NV_DESCRIPTOR_ALIGN - 1)) ||
        count < NV_DESC_CONTROL_SIZE / 4 || !nv_via_host_range(via, desc, 4 * count))
        return NV_VIP_INVALID_PARAMETER;
    uint32_t op = (uint32_t)nv_get_field(words, NV_DESC_CONTROL_CONTROL_OFFSET, NV_DESC_CONTROL_CONTROL_BYTES) &
                  NV_DESC_CONTROL_CONTROL_OP_MASK;
    uint32_t segments =
        (uint32_t)nv_get_field(words, NV_DESC_CONTROL_SEG_COUNT_OFFSET, NV_DESC_CONTROL_SEG_COUNT_BYTES);
    uint32_t first = NV_DESC_CONTROL_SIZE + (op == NV_CONTROL_OP_SENDRECV ? 0 : NV_DESC_ADDRESS_SIZE);
    if (segments > via->max_segments || 4 * count != first + segments * NV_DESC_DATA_SIZE)
        return NV_VIP_INVALID_PARAMETER;
    for (unsigned i = 0; i < count; i++)
        nv_host_write32(desc + 4 * i, 4 * i == NV_DESC_CONTROL_STATUS_OFFSET ? 0 : words[i]);
    nv_reg_write(NV_VIA_FORGET_COPIES, 1); /* the card may hold a copy of what was here */
    *p = (struct nv_via_prebuilt){
        .magic = NV_VIA_PREBUILT_MAGIC,
        .desc = desc,
        .doorbell = send_queue ? NV_DOORBELL_VI_SQ_REPOST_AT(vi) : NV_DOORBELL_VI_RQ_DOORBELL_AT(vi),
        .repost = send_queue ? NV_DOORBELL_VI_SQ_REPOST - NV_DOORBELL_VI_SQ_DOORBELL : 0,
        .length_at = segments ? desc + first + NV_DESC_DATA_LENGTH_OFFSET : 0,
        .length = segments ? words[(first + NV_DESC_DATA_LENGTH_OFFSET) / 4] : 0,
        .generation = via->generation,
        .vi = (uint8_t)vi,
    };
    return NV_VIP_SUCCESS;
}

uint32_t nv_via_prebuilt_release(struct nv_via_prebuilt *p)
{
    if (p == NULL || p->magic != NV_VIA_PREBUILT_MAGIC)
        return NV_VIP_INVALID_PARAMETER;
    if (p->posted)
        return NV_VIP_INVALID_STATE;
    p->magic = 0;
    return NV_VIP_SUCCESS;
}
