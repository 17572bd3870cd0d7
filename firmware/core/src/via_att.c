/* Memory registration: the card's two-level address translation table (docs/via.md).
 *
 * A region gets a level-1 entry (its memory handle) and a run of level-2 entries, one per page,
 * holding the physical addresses the host gave in its page list. Everything is checked before
 * the table is touched, and an entry's ATTRIBUTES word (with VALID) is written last, so the engine
 * never sees a half-written entry. */
#include <stddef.h>

#include "numavia/platform.h"
#include "numavia/via.h"
#include "numavia_regs.h"
#include "numavia_via.h"
#include "via_internal.h"

#define PAGE_MASK (NV_ATT_PAGE_SIZE - 1u)
/* Push-pull registers memory for every long message: this is on its timed path (NV_TIMED). */
#define TIMED NV_TIMED(pushpull)

static TIMED int l2_used(const struct nv_via *via, uint32_t i)
{
    return (via->l2_used[i / 32] >> (i % 32)) & 1u;
}

static TIMED void l2_mark(struct nv_via *via, uint32_t first, uint32_t count, int used)
{
    for (uint32_t i = first; i < first + count; i++) {
        if (used)
            via->l2_used[i / 32] |= 1u << (i % 32);
        else
            via->l2_used[i / 32] &= ~(1u << (i % 32));
    }
}

/* First run of `count` free level-2 entries, or att_pages if there is none. */
static TIMED uint32_t l2_find(const struct nv_via *via, uint32_t count)
{
    uint32_t run = 0;
    for (uint32_t i = 0; i < via->att_pages; i++) {
        run = l2_used(via, i) ? 0 : run + 1;
        if (run == count)
            return i + 1 - count;
    }
    return via->att_pages;
}

static TIMED void att_write(uint32_t word, uint32_t value)
{
    nv_reg_write(NV_VIA_ATT_ADDR, word);
    nv_reg_write(NV_VIA_ATT_WDATA, value);
}

#define PUT(words, field, value) nv_put_field(words, NV_ATT_L1_##field##_OFFSET, NV_ATT_L1_##field##_BYTES, value)

TIMED uint32_t nv_via_register_mem(struct nv_via *via, uint64_t va, uint32_t length, uint32_t ptag, uint32_t attributes,
                                   uint32_t page_list, uint32_t page_count, uint32_t *handle)
{
    const uint32_t rights = NV_ATT_L1_ATTRIBUTES_RDMA_READ_MASK | NV_ATT_L1_ATTRIBUTES_RDMA_WRITE_MASK;
    if (length == 0 || (attributes & ~rights) || va + length < va)
        return NV_VIP_INVALID_PARAMETER;
    if (ptag < 1 || ptag > NV_VIA_MAX_PTAGS || !(via->ptags & (1u << (ptag - 1))))
        return NV_VIP_INVALID_PTAG;
    uint64_t first_page = va >> NV_ATT_PAGE_SHIFT, last_page = (va + length - 1) >> NV_ATT_PAGE_SHIFT;
    uint32_t pages = (uint32_t)(last_page - first_page + 1);
    if (page_count != pages || (page_list & 3) || !nv_via_host_range(via, page_list, 4 * pages))
        return NV_VIP_INVALID_PARAMETER;

    /* Every page must be host memory; the first keeps the virtual address's offset in its page. */
    nv_host_sync();
    uint32_t first_size = NV_ATT_PAGE_SIZE - (uint32_t)(va & PAGE_MASK);
    if (first_size > length)
        first_size = length;
    for (uint32_t i = 0; i < pages; i++) {
        uint32_t pa = nv_host_read32(page_list + 4 * i);
        uint32_t offset = i == 0 ? (uint32_t)(va & PAGE_MASK) : 0;
        uint32_t bytes = i == 0 ? first_size : NV_ATT_PAGE_SIZE;
        if ((pa & PAGE_MASK) != offset || !nv_via_host_range(via, pa, bytes))
            return NV_VIP_INVALID_PARAMETER;
    }

    uint32_t h = 0;
    while (h < via->att_regions && via->regions[h].used)
        h++;
    uint32_t l2 = l2_find(via, pages);
    if (h == via->att_regions || l2 == via->att_pages)
        return NV_VIP_ERROR_RESOURCE;

    uint32_t l2_base = via->att_regions * NV_ATT_L1_STRIDE_WORDS;
    for (uint32_t i = 0; i < pages; i++)
        att_write(l2_base + l2 + i, nv_host_read32(page_list + 4 * i));
    uint32_t words[NV_ATT_L1_WORDS] = {0};
    PUT(words, START_VA, va);
    PUT(words, LENGTH, length);
    PUT(words, L2_INDEX, l2);
    PUT(words, PAGE_COUNT, pages);
    PUT(words, FIRST_PAGE_SIZE, first_size);
    PUT(words, PTAG, ptag);
    PUT(words, ATTRIBUTES, attributes | NV_ATT_L1_ATTRIBUTES_VALID_MASK);
    const unsigned valid_word = NV_ATT_L1_ATTRIBUTES_OFFSET / 4;
    uint32_t entry = h * NV_ATT_L1_STRIDE_WORDS;
    for (unsigned i = 0; i < NV_ATT_L1_WORDS; i++)
        if (i != valid_word)
            att_write(entry + i, words[i]);
    att_write(entry + valid_word, words[valid_word]); /* VALID last */
    via->regions[h].used = 1;
    via->regions[h].ptag = (uint8_t)ptag;
    via->regions[h].l2_index = (uint16_t)l2;
    via->regions[h].pages = (uint16_t)pages;
    l2_mark(via, l2, pages, 1);
    *handle = h;
    return NV_VIP_SUCCESS;
}

TIMED uint32_t nv_via_deregister_mem(struct nv_via *via, uint32_t handle)
{
    if (handle >= via->att_regions || !via->regions[handle].used)
        return NV_VIP_INVALID_PARAMETER;
    /* VALID off first: the engine refuses the handle from now on. */
    uint32_t words[NV_ATT_L1_WORDS] = {0};
    PUT(words, PTAG, via->regions[handle].ptag);
    att_write(handle * NV_ATT_L1_STRIDE_WORDS + NV_ATT_L1_ATTRIBUTES_OFFSET / 4,
              words[NV_ATT_L1_ATTRIBUTES_OFFSET / 4]);
    l2_mark(via, via->regions[handle].l2_index, via->regions[handle].pages, 0);
    via->regions[handle].used = 0;
    via->generation++;
    return NV_VIP_SUCCESS;
}
