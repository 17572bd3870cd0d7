// Unit test of the harness's SCI ring link (ring_link.hpp) with plain variables for the link ports
// and the channel in local memory: the delay, bit flips, lost packets, duplicated packets (only
// over idle symbols), determinism.
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "verilated.h"
#include "ring_link.hpp"

static int failures = 0;
#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            failures++;                                                                                                \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                               \
        }                                                                                                              \
    } while (0)

static constexpr uint32_t kFrame = 1u << 16;
static constexpr unsigned kMaxPacket = 8;
static constexpr uint64_t kPeriod = 10000;   // ps

// Packets of `length` symbols (data = id << 8 | index), `gap` idle symbols after each.
static std::vector<uint32_t> stream(int packets, unsigned length, unsigned gap) {
    std::vector<uint32_t> s;
    for (int p = 0; p < packets; p++) {
        for (unsigned k = 0; k < length; k++) s.push_back(kFrame | uint32_t(p) << 8 | k);
        s.insert(s.end(), gap, 0);
    }
    return s;
}

struct Result {
    std::vector<uint32_t> rx;   // what node 1 received, one symbol per cycle
    RingFaultCounts counts;
};

// Node 0 sends `tx` (then idle) to node 1 over the link, one symbol per cycle.
static Result run(const std::vector<uint32_t> &tx, unsigned delay, const RingFaults &faults, uint64_t seed = 1) {
    IData tx0 = 0, rx1 = 0;
    CData clk = 0;
    ClockDomain sys(ClockSpec{"sys", kPeriod, &clk});
    LocalQueue link(1 << 12);
    RingTransmitter sender(&tx0, link.queue, sys);
    RingReceiver receiver(&rx1, Inlet{&link.queue, RingReceiver::channel_latency_ps(delay, faults, kPeriod)}, sys,
                          delay, faults, seed);
    Result r;
    for (size_t c = 0; c < tx.size() + delay + 64; c++) {
        if (sys.high()) sys.fall();
        receiver.drive(c);
        r.rx.push_back(rx1);
        tx0 = c < tx.size() ? tx[c] : 0;
        sender.sample(c);
        sys.rise();
        link.queue.publish(sys.next_rise_ps() - 1);
    }
    r.counts = receiver.counts();
    return r;
}

// The packets (runs of framed symbols) in a symbol stream.
static std::vector<std::vector<uint32_t>> packets(const std::vector<uint32_t> &s) {
    std::vector<std::vector<uint32_t>> out;
    bool in = false;
    for (uint32_t symbol : s) {
        if (symbol & kFrame) {
            if (!in) out.emplace_back();
            out.back().push_back(symbol);
        }
        in = symbol & kFrame;
    }
    return out;
}

int main() {
    const unsigned delay = kMaxPacket + 4;
    const std::vector<uint32_t> sent = stream(20, 6, 10);
    const auto sent_packets = packets(sent);

    // No faults: the same symbols, `delay` cycles later.
    Result clean = run(sent, delay, RingFaults{});
    CHECK(std::vector<uint32_t>(clean.rx.begin() + delay, clean.rx.begin() + delay + sent.size()) == sent);
    CHECK(clean.counts.packets == 20 && clean.counts.dropped == 0 && clean.counts.duplicated == 0);

    // Bit flips hit packet symbols only, one bit each.
    RingFaults flips;
    flips.flip_rate = 1.0;
    Result flipped = run(sent, delay, flips);
    CHECK(flipped.counts.flips == 20 * 6);
    for (size_t c = 0; c < sent.size(); c++) {
        const uint32_t diff = flipped.rx[c + delay] ^ sent[c];
        CHECK((sent[c] & kFrame) ? __builtin_popcount(diff) == 1 : diff == 0);
    }

    // Lost packets arrive as idle symbols; the others intact.
    RingFaults lossy;
    lossy.drop = 0.5;
    Result lost = run(sent, delay, lossy, 42);
    auto got = packets(lost.rx);
    CHECK(lost.counts.dropped > 0 && lost.counts.dropped < 20);
    CHECK(got.size() == 20 - lost.counts.dropped);
    size_t next = 0;   // what arrives is the sent packets, in order, with some left out
    for (const auto &p : got) {
        while (next < sent_packets.size() && sent_packets[next] != p) next++;
        CHECK(next < sent_packets.size());
        next++;
    }
    CHECK(packets(run(sent, delay, lossy, 42).rx) == got);   // same seed, same losses
    CHECK(packets(run(sent, delay, lossy, 43).rx) != got);

    // Duplicates: an exact copy after one idle symbol, when idle symbols make room for it.
    RingFaults twice;
    twice.duplicate = 1.0;
    twice.max_packet = kMaxPacket;
    Result dup = run(sent, delay, twice);
    got = packets(dup.rx);
    CHECK(dup.counts.duplicated == 20 && got.size() == 40);
    for (size_t p = 0; p + 1 < got.size(); p += 2) CHECK(got[p] == got[p + 1] && got[p] == sent_packets[p / 2]);
    // Back to back packets leave no room: nothing is written over them.
    const std::vector<uint32_t> tight = stream(5, 6, 2);
    Result crowded = run(tight, delay, twice);
    auto expected = packets(tight);
    expected.push_back(expected.back());   // only the last one, with idle symbols after it, is copied
    CHECK(packets(crowded.rx) == expected && crowded.counts.duplicated == 1);
    // A link shorter than a packet cannot hold a copy.
    bool refused = false;
    try {
        run(sent, kMaxPacket, twice);
    } catch (const std::invalid_argument &) {
        refused = true;
    }
    CHECK(refused);
    // The channel's latency leaves the receiver room to look a packet ahead, and no more.
    CHECK(RingReceiver::channel_latency_ps(delay, twice, kPeriod) == (delay - kMaxPacket - 1) * kPeriod);
    CHECK(RingReceiver::channel_latency_ps(delay, RingFaults{}, kPeriod) == delay * kPeriod);

    std::printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
