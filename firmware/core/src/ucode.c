/* Loading the remote access controller's control store. */
#include <stddef.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia_regs.h"

/* Four bits at a time: a 16-entry table costs 64 bytes of ROM and is 4x faster than bit by
 * bit, which matters for the boot-time check of the image on the card's 100 MHz VexRiscv. */
static const uint32_t crc32_nibble[16] = {
    0x00000000u, 0x1db71064u, 0x3b6e20c8u, 0x26d930acu, 0x76dc4190u, 0x6b6b51f4u, 0x4db26158u, 0x5005713cu,
    0xedb88320u, 0xf00f9344u, 0xd6d6a3e8u, 0xcb61b38cu, 0x9b64c2b0u, 0x86d3d2d4u, 0xa00ae278u, 0xbdbdf21cu,
};

/* One byte into a running CRC (kept inverted). */
static uint32_t crc_byte(uint32_t crc, uint32_t byte)
{
    crc ^= byte;
    crc = (crc >> 4) ^ crc32_nibble[crc & 0xf];
    return (crc >> 4) ^ crc32_nibble[crc & 0xf];
}

uint32_t nv_crc32(uint32_t crc, const void *data, uint32_t len)
{
    const uint8_t *p = data;
    crc = ~crc;
    while (len--)
        crc = crc_byte(crc, *p++);
    return ~crc;
}

static uint64_t read_word(uint32_t addr)
{
    nv_reg_write(NV_RAC_UCODE_ADDR, addr);
    uint32_t lo = nv_reg_read(NV_RAC_UCODE_RDATA_LO);
    uint32_t hi = nv_reg_read(NV_RAC_UCODE_RDATA_HI);
    return (uint64_t)hi << 32 | lo;
}

/* `crc` continued over one word as the store holds it (8 bytes, little-endian). From the word's
 * halves in registers: through a byte array on the stack the boot's check took 2 to 4 times as long
 * on the card's VexRiscv, by where the linker happened to put the code and data. */
static uint32_t crc_word(uint32_t crc, uint64_t word)
{
    crc = ~crc;
    for (int half = 0; half < 2; half++) {
        uint32_t bytes = half ? (uint32_t)(word >> 32) : (uint32_t)word;
        for (int b = 0; b < 4; b++, bytes >>= 8)
            crc = crc_byte(crc, bytes & 0xffu);
    }
    return ~crc;
}

/* Reads an image's words in order, from either form. */
struct ucode_cursor {
    const uint64_t *words;     /* the next word of a word image, else NULL */
    const uint8_t *next, *end; /* the next byte of a packed image, and its end */
    bool overrun;              /* the packed masks asked for bytes past the end */
};

static struct ucode_cursor cursor(const struct nv_ucode_image *image)
{
    struct ucode_cursor c = {image->words, image->packed, image->packed, false};
    if (c.words == NULL)
        c.end += image->packed_bytes;
    return c;
}

static uint64_t next_word(struct ucode_cursor *c)
{
    if (c->words != NULL)
        return *c->words++;
    /* The loop works on locals and stores the cursor back once: the boot's load unpacks every word
     * twice. */
    const uint8_t *next = c->next, *end = c->end;
    uint32_t lo = 0, hi = 0; /* 32-bit halves: a 64-bit variable shift is a dozen instructions on rv32 */
    if (next == end) {
        c->overrun = true; /* the missing word reads as 0: the image then fails its check */
        return 0;
    }
    unsigned mask = *next++;
    for (unsigned b = 0; b < 8 && mask; b++, mask >>= 1) {
        if (!(mask & 1))
            continue;
        if (next == end) {
            c->overrun = true; /* the missing bytes read as 0 */
            break;
        }
        uint32_t byte = *next++;
        if (b < 4)
            lo |= byte << (8 * b);
        else
            hi |= byte << (8 * (b - 4));
    }
    c->next = next;
    return (uint64_t)hi << 32 | lo;
}

/* A packed image whose masks account for more or fewer bytes than it has is not the image it claims
 * to be, even should its words have the CRC. */
static bool read_to_the_end(const struct ucode_cursor *c)
{
    return c->words != NULL || (c->next == c->end && !c->overrun);
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
    struct ucode_cursor c = cursor(image);
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
    struct ucode_cursor c = cursor(image);
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
    struct ucode_cursor c = cursor(image);
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
