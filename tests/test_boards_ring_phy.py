"""The board ring link's elastic buffer: packets cross between two unrelated clocks whole, in order,
contiguous and with an idle symbol between them, whichever clock is faster."""

import random

import pytest
from migen import run_simulation

from numavia.boards.ring_phy import PacketElasticBuffer


def _cross(write_period, read_period, packets, gap=1, idle_after=400):
    dut = PacketElasticBuffer("ring_rx", "sys", packets=4)
    received, frames = [], []

    def writer():
        for packet in packets:
            for symbol in packet:
                yield dut.write_data.eq(symbol)
                yield dut.write_frame.eq(1)
                yield
            for _ in range(gap):
                yield dut.write_frame.eq(0)
                yield
        yield dut.write_frame.eq(0)

    def reader():
        current = None
        for _ in range(sum(len(p) + gap for p in packets) * read_period // max(1, write_period) * 2 + idle_after):
            frame = yield dut.read_frame
            frames.append(frame)
            if frame:
                current = (current or []) + [(yield dut.read_data)]
            elif current is not None:
                received.append(current)
                current = None
            yield

    run_simulation(dut, {"ring_rx": writer(), "sys": reader()}, clocks={"ring_rx": write_period, "sys": read_period})
    return received, frames


def _packets(count, seed):
    rng = random.Random(seed)
    return [[rng.randrange(1 << 16) for _ in range(rng.choice((2, 10, 43)))] for _ in range(count)]


@pytest.mark.parametrize("write_period,read_period", [(10, 11), (11, 10), (10, 10)])
def test_packets_arrive_whole_in_order(write_period, read_period):
    packets = _packets(12, seed=write_period * 100 + read_period)
    received, _ = _cross(write_period, read_period, packets, gap=12)
    assert received == packets


def test_back_to_back_packets_keep_an_idle_symbol_between_them():
    packets = _packets(3, seed=7)
    received, frames = _cross(10, 10, packets, gap=1)
    assert received == packets
    # Every packet is separated by at least one idle symbol: the number of frame runs equals the
    # number of packets.
    runs = [r for r in "".join(map(str, frames)).split("0") if r]
    assert [len(r) for r in runs] == [len(p) for p in packets]


def test_a_packet_without_room_is_dropped_whole():
    # The reader's clock is much slower: the buffer fills and later packets are dropped entirely,
    # never cut; what arrives is a prefix of what was sent, each packet intact.
    packets = _packets(20, seed=3)
    received, _ = _cross(10, 37, packets, gap=1, idle_after=4000)
    assert 0 < len(received) < len(packets)
    for packet in received:
        assert packet in packets
    assert received == [p for p in packets if p in received]
