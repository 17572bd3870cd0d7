/* Loading the remote access controller's control store. */
#include <stddef.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia_regs.h"

/* Four bits at a time: a 16-entry table costs 64 bytes of ROM and is 4x faster than bit by
 * bit, which matters on a VexRiscv without a cache for the boot-time check of the image. */
static const uint32_t crc32_nibble[16] = {
    0x00000000u, 0x1db71064u, 0x3b6e20c8u, 0x26d930acu, 0x76dc4190u, 0x6b6b51f4u, 0x4db26158u, 0x5005713cu,
    0xedb88320u, 0xf00f9344u, 0xd6d6a3e8u, 0xcb61b38cu, 0x9b64c2b0u, 0x86d3d2d4u, 0xa00ae278u, 0xbdbdf21cu,
};

uint32_t nv_crc32(uint32_t crc, const void *data, uint32_t len)
{
    const uint8_t *p = data;
    crc = ~crc;
    while (len--) {
        crc ^= *p++;
        crc = (crc >> 4) ^ crc32_nibble[crc & 0xf];
        crc = (crc >> 4) ^ crc32_nibble[crc & 0xf];
    }
    return ~crc;
}

static uint64_t read_word(uint32_t addr)
{
    nv_reg_write(NV_RAC_UCODE_ADDR, addr);
    uint32_t lo = nv_reg_read(NV_RAC_UCODE_RDATA_LO);
    uint32_t hi = nv_reg_read(NV_RAC_UCODE_RDATA_HI);
    return (uint64_t)hi << 32 | lo;
}

/* `crc` continued over one word as the store holds it (8 bytes, little-endian). */
static uint32_t crc_word(uint32_t crc, uint64_t word)
{
    uint8_t bytes[8];
    for (int b = 0; b < 8; b++)
        bytes[b] = (uint8_t)(word >> (8 * b));
    return nv_crc32(crc, bytes, sizeof bytes);
}

/* Reads an image's words in order, from either form. */
struct ucode_cursor {
    const struct nv_ucode_image *image;
    uint32_t next; /* the next word, or the next packed byte */
};

/* Past the end of a packed image reads as 0, and still counts: the image then fails its check. */
static uint8_t packed_byte(struct ucode_cursor *c)
{
    uint8_t byte = c->next < c->image->packed_bytes ? c->image->packed[c->next] : 0;
    c->next++;
    return byte;
}

static uint64_t next_word(struct ucode_cursor *c)
{
    if (c->image->words != NULL)
        return c->image->words[c->next++];
    uint8_t mask = packed_byte(c);
    uint32_t half[2] = {0, 0}; /* 32-bit shifts: a 64-bit one is a dozen instructions on rv32 */
    for (int b = 0; b < 8; b++)
        if (mask & (1u << b))
            half[b / 4] |= (uint32_t)packed_byte(c) << (8 * (b % 4));
    return (uint64_t)half[1] << 32 | half[0];
}

/* A packed image whose masks account for more or fewer bytes than it has is not the image it claims
 * to be, even should its words have the CRC. */
static bool read_to_the_end(const struct ucode_cursor *c)
{
    return c->image->words != NULL || c->next == c->image->packed_bytes;
}

static nv_status check_image(const struct nv_ucode_image *image)
{
    if (image == NULL || (image->words == NULL && image->packed == NULL))
        return NV_ERR_ARG;
    if (image->count == 0 || image->count > nv_reg_read(NV_RAC_UCODE_DEPTH))
        return NV_ERR_RANGE;
    return NV_OK;
}

/* The image's words have its CRC (not a corrupted or truncated copy). */
static nv_status check_image_crc(const struct nv_ucode_image *image)
{
    struct ucode_cursor c = {image, 0};
    uint32_t crc = 0;
    for (uint32_t i = 0; i < image->count; i++)
        crc = crc_word(crc, next_word(&c));
    return crc == image->crc32 && read_to_the_end(&c) ? NV_OK : NV_ERR_CRC;
}

nv_status nv_ucode_verify(const struct nv_ucode_image *image, uint32_t *bad_word)
{
    nv_status status = check_image(image);
    if (status != NV_OK)
        return status;
    /* The CRC is taken over what the store returns, not over the image: it catches a store that
     * matches the image but an image that is not the one it claims to be (wrong header). */
    struct ucode_cursor c = {image, 0};
    uint32_t crc = 0;
    for (uint32_t i = 0; i < image->count; i++) {
        uint64_t word = read_word(i);
        if (word != next_word(&c)) {
            if (bad_word != NULL)
                *bad_word = i;
            return NV_ERR_READBACK;
        }
        crc = crc_word(crc, word);
    }
    return crc == image->crc32 && read_to_the_end(&c) ? NV_OK : NV_ERR_CRC;
}

nv_status nv_ucode_load(const struct nv_ucode_image *image, uint32_t *bad_word)
{
    nv_status status = check_image(image);
    if (status != NV_OK)
        return status;
    /* Replacing live microcode: an image that fails its check is refused before the store is
     * touched, so the running one stays live. (At boot nothing runs yet; the read-back below
     * checks the CRC of what was written, which catches a bad image as well.) */
    if ((nv_reg_read(NV_RAC_STATUS) & NV_RAC_STATUS_LOADED_MASK) && (status = check_image_crc(image)) != NV_OK)
        return status;
    /* The store can only be written while the sequencer is not live. */
    uint32_t keep = nv_reg_read(NV_RAC_CTRL) & NV_RAC_CTRL_MICROCODE_ONLY_MASK;
    nv_reg_write(NV_RAC_CTRL, keep);
    nv_reg_write(NV_RAC_UCODE_ADDR, 0);
    struct ucode_cursor c = {image, 0};
    for (uint32_t i = 0; i < image->count; i++) {
        uint64_t word = next_word(&c);
        nv_reg_write(NV_RAC_UCODE_WDATA_LO, (uint32_t)word);
        nv_reg_write(NV_RAC_UCODE_WDATA_HI, (uint32_t)(word >> 32));
    }
    status = nv_ucode_verify(image, bad_word);
    if (status != NV_OK)
        return status;
    nv_reg_write(NV_RAC_CTRL, NV_RAC_CTRL_LOADED_MASK | keep);
    if (!(nv_reg_read(NV_RAC_STATUS) & NV_RAC_STATUS_LOADED_MASK))
        return NV_ERR_NOT_LOADED;
    return NV_OK;
}

void nv_ucode_set_fast_path(bool on)
{
    uint32_t ctrl = nv_reg_read(NV_RAC_CTRL) & ~NV_RAC_CTRL_MICROCODE_ONLY_MASK;
    nv_reg_write(NV_RAC_CTRL, ctrl | (on ? 0 : NV_RAC_CTRL_MICROCODE_ONLY_MASK));
}

bool nv_ucode_fast_path(void)
{
    return !(nv_reg_read(NV_RAC_CTRL) & NV_RAC_CTRL_MICROCODE_ONLY_MASK);
}
