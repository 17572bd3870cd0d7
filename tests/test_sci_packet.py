"""SCI packet format: encode/decode round trip, CRC, malformed input."""

import random

import pytest

from numavia.base import sci_packet as sp


def random_packet(rng, ptype=None):
    ptype = rng.choice(list(sp.PacketType)) if ptype is None else ptype
    fields = {f.name: rng.randrange(1 << f.width) for f in sp.HEADER_FIELDS}
    fields["ptype"] = ptype
    if rng.random() < 0.25:
        fields["cmd"] = sp.Command.MUWRITE  # the long header, in requests
    elif rng.random() < 0.2:
        fields["cmd"] = sp.Command.MUREAD  # its answer carries the words asked for
        fields["word"] = rng.randrange(sp.DATA_WORDS)
        fields["count"] = rng.randrange(1, sp.DATA_WORDS - fields["word"] + 1)
    if sp.header_symbols(ptype, fields["cmd"]) == sp.SHORT_HEADER_SYMBOLS:
        fields["be"] = 0
    if ptype == sp.PacketType.ECHO:
        # an echo carries only its first two header symbols
        keep = {f.name for f in sp.HEADER_FIELDS[:8]}
        fields = {k: (v if k in keep else 0) for k, v in fields.items()}
        fields["has_data"] = 0
    packet = sp.Packet(**fields)
    if packet.has_data:
        first, number = sp.data_range(packet)
        packet.data = [rng.randrange(1 << 32) if first <= w < first + number else 0 for w in range(sp.DATA_WORDS)]
    return packet


def test_round_trip_of_random_packets():
    rng = random.Random(7)
    for _ in range(500):
        packet = random_packet(rng)
        symbols = sp.encode(packet)
        assert len(symbols) == sp.packet_symbols(packet.ptype, packet.cmd, packet.has_data, count=packet.count)
        assert all(0 <= s < 1 << 16 for s in symbols)
        assert sp.decode(symbols) == packet


def test_only_an_uncached_write_request_carries_the_byte_enables():
    write = sp.Packet(ptype=sp.PacketType.REQUEST, cmd=sp.Command.MUWRITE, has_data=1, be=0xF0, data=[0] * 16)
    read = sp.Packet(ptype=sp.PacketType.REQUEST, cmd=sp.Command.MUREAD, word=3, count=1)
    answer = sp.Packet(ptype=sp.PacketType.RESPONSE, cmd=sp.Command.MUWRITE)
    assert len(sp.encode(write)) == sp.HEADER_SYMBOLS + 32 + 1 == sp.MAX_PACKET_SYMBOLS
    assert len(sp.encode(read)) == sp.SHORT_HEADER_SYMBOLS + 1
    assert len(sp.encode(answer)) == sp.SHORT_HEADER_SYMBOLS + 1
    assert sp.decode(sp.encode(write)).be == 0xF0 and sp.decode(sp.encode(read)).word == 3
    # Other packets leave the byte enables off the wire, as the ring link's transmit side does.
    assert sp.decode(sp.encode(sp.Packet(ptype=sp.PacketType.REQUEST, cmd=sp.Command.MREAD, be=1))).be == 0


def test_an_uncached_reads_answer_carries_the_words_asked_for_in_their_places():
    line = list(range(100, 100 + sp.DATA_WORDS))
    answer = sp.Packet(ptype=sp.PacketType.RESPONSE, cmd=sp.Command.MUREAD, has_data=1, word=5, count=2, data=line)
    symbols = sp.encode(answer)
    assert len(symbols) == sp.SHORT_HEADER_SYMBOLS + 2 * 2 + 1
    assert symbols[sp.SHORT_HEADER_SYMBOLS : -1] == [0, 105, 0, 106]
    got = sp.decode(symbols)
    assert got.data[5:7] == [105, 106] and got.data.count(0) == sp.DATA_WORDS - 2
    # Every other data packet, the request included, carries the whole line.
    request = sp.Packet(ptype=sp.PacketType.REQUEST, cmd=sp.Command.MUREAD, has_data=1, word=5, count=2, data=line)
    assert sp.decode(sp.encode(request)).data == line


@pytest.mark.parametrize("word, count", [(0, 0), (15, 2), (9, 31)])
def test_an_answer_whose_words_are_not_in_the_line_is_malformed(word, count):
    answer = sp.Packet(ptype=sp.PacketType.RESPONSE, cmd=sp.Command.MUREAD, has_data=1, word=word, count=count)
    answer.data = [0] * sp.DATA_WORDS
    with pytest.raises(sp.PacketError, match="not in the line"):
        sp.encode(answer)
    value = answer.header_value()
    header = [(value >> (sp.HEADER_BITS - 16 * (i + 1))) & 0xFFFF for i in range(sp.SHORT_HEADER_SYMBOLS)]
    symbols = header + [0] * 2 * count
    with pytest.raises(sp.PacketError, match="not in the line"):
        sp.decode(symbols + [sp.crc16(symbols)])
    # The home answers such a request with the whole line instead.
    assert sp.answered_words(word, count) == (0, sp.DATA_WORDS)
    assert sp.answered_words(3, 4) == (3, 4)


def test_crc_is_ccitt_false():
    # "12345678" as four big-endian symbols; CRC-16/CCITT-FALSE of the 8 bytes.
    assert sp.crc16([0x3132, 0x3334, 0x3536, 0x3738]) == 0xA12B


def test_any_single_bit_flip_is_detected():
    rng = random.Random(3)
    symbols = sp.encode(random_packet(rng, sp.PacketType.REQUEST))
    for i in range(len(symbols)):
        for bit in range(16):
            bad = list(symbols)
            bad[i] ^= 1 << bit
            with pytest.raises(sp.PacketError):
                sp.decode(bad)


@pytest.mark.parametrize(
    "symbols, message",
    [
        ([], "shorter"),
        ([0x1234, 0x0000], "shorter"),
    ],
)
def test_too_short(symbols, message):
    with pytest.raises(sp.PacketError, match=message):
        sp.decode(symbols)


def test_truncated_body_is_rejected():
    packet = sp.Packet(target=1, source=2, has_data=1, data=list(range(16)))
    symbols = sp.encode(packet)
    body = symbols[:-5]
    with pytest.raises(sp.PacketError, match="body symbols"):
        sp.decode(body + [sp.crc16(body)])


def test_field_overflow_is_rejected():
    with pytest.raises(sp.PacketError, match="does not fit"):
        sp.encode(sp.Packet(target=64))


def test_line_address():
    assert sp.home_of(sp.line_address(5, 0x1C0)) == 5
    with pytest.raises(ValueError):
        sp.line_address(5, 0x1C4)
    with pytest.raises(ValueError):
        sp.line_address(64, 0)
