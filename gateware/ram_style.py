"""Where synthesis should put a memory read through a registered port.

The ECP5's LUT RAM (``DPR16X4``) is 16 entries deep: a deeper memory is several of them and a
multiplexer per bit after them, and each read port is a copy of it all, while a block RAM holds
512 entries of 36 bits a read port. yosys picks LUT RAM for such memories up to a few hundred bits
a copy, so the card names block RAM where the depth makes LUT RAM dear: for the 64-VI card's
records and, where a card asks for it (``CardConfig.tags_in_block_ram``), the network cache's tags.
"""

#: Entries of one ECP5 LUT RAM (``TRELLIS_DPR16X4``).
LUT_RAM_DEPTH = 16

#: The most bits of a memory kept in LUT RAM where synthesis could take a block RAM for it (a
#: block RAM would hold it many times over, and the 64-VI card has none to spare).
LUT_RAM_MOST_BITS = 1024

#: ``Memory`` attributes keeping a memory in LUT RAM.
LUT_RAM_ATTRS = {"ram_style": "distributed"}


def block_ram_attrs(depth):
    """``Memory`` attributes asking yosys for block RAM where ``depth`` exceeds one LUT RAM's (a
    memory that shallow costs no multiplexer in LUT RAM, and a block RAM would hold it 32 times)."""
    return {"ram_style": "block"} if depth > LUT_RAM_DEPTH else {}
