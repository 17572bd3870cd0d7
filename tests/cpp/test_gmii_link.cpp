// Unit test of the harness's Ethernet (gmii_link.hpp): nodes' GMII ports with plain variables for
// their pins, joined to the switch by channels in local memory: forwarding by destination MAC, the
// delay, the gap between frames, loss, corruption, duplication, reordering, determinism.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#define NV_ETH_ROUTE_CYCLES 14
#include "verilated.h"
#include "gmii_link.hpp"

static constexpr uint64_t kPeriod = 8000;   // ps

struct Node {
    CData tx_en = 0, tx_data = 0, rx_dv = 0, rx_data = 0;
    std::vector<std::vector<uint8_t>> received;   // frames seen on rx, bytes as on the wire
    std::vector<uint64_t> starts;
    bool in_frame = false;
};

static int failures = 0;
#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            failures++;                                                                                                \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                               \
        }                                                                                                              \
    } while (0)

static std::string slurp(const std::string &path) {
    std::string text;
    if (FILE *f = std::fopen(path.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
        std::fclose(f);
    }
    return text;
}

static std::vector<uint8_t> frame(int dst, int src, int length, uint8_t fill) {
    std::vector<uint8_t> f = {0x55, 0x55, 0x55, 0x55,         0x55, 0x55, 0x55, 0xd5, 0x02, 0x4e,
                              0x56, 0x00, 0x00, uint8_t(dst), 0x02, 0x4e, 0x56, 0x00, 0x00, uint8_t(src)};
    while (int(f.size()) < 8 + length) f.push_back(fill++);
    return f;
}

// Run `cycles` cycles; node i transmits frames[i] back to back (with a 12-byte gap) from cycle 0.
static std::vector<Node> run(int n, const std::vector<std::vector<std::vector<uint8_t>>> &frames,
                             const GmiiLinkOptions &opt, uint64_t cycles, const std::string &stats_path = "") {
    std::vector<Node> nodes(n);
    CData clk = 0;
    ClockDomain eth(ClockSpec{"eth", kPeriod, &clk});
    std::vector<std::unique_ptr<LocalQueue>> up, down;
    std::vector<std::unique_ptr<GmiiPort>> ports;
    std::vector<Inlet> to_switch;
    std::vector<Queue *> from_switch;
    for (int i = 0; i < n; i++) {
        up.emplace_back(new LocalQueue(1 << 14));
        down.emplace_back(new LocalQueue(1 << 14));
        ports.emplace_back(new GmiiPort(&nodes[i].tx_en, &nodes[i].tx_data, &nodes[i].rx_dv, &nodes[i].rx_data,
                                        up[i]->queue, Inlet{&down[i]->queue, opt.from_switch() * kPeriod}, eth));
        to_switch.push_back({&up[i]->queue, opt.to_switch() * kPeriod});
        from_switch.push_back(&down[i]->queue);
    }
    std::vector<size_t> which(n, 0), pos(n, 0);
    std::vector<uint64_t> gap(n, 0);
    std::unique_ptr<EthernetSwitch> sw(new EthernetSwitch(to_switch, from_switch, opt, stats_path));
    for (uint64_t c = 0; c < cycles; c++) {
        if (eth.high()) eth.fall();
        for (int i = 0; i < n; i++) ports[i]->drive(c);
        for (int i = 0; i < n; i++) {   // what each node transmits this cycle
            Node &node = nodes[i];
            node.tx_en = 0;
            if (which[i] < frames[i].size() && gap[i] == 0) {
                node.tx_en = 1;
                node.tx_data = frames[i][which[i]][pos[i]++];
                if (pos[i] == frames[i][which[i]].size()) {
                    which[i]++;
                    pos[i] = 0;
                    gap[i] = 12;
                }
            } else if (gap[i]) {
                gap[i]--;
            }
        }
        for (int i = 0; i < n; i++) {
            Node &node = nodes[i];
            if (node.rx_dv) {
                if (!node.in_frame) {
                    node.received.emplace_back();
                    node.starts.push_back(c);
                }
                node.received.back().push_back(node.rx_data);
            }
            node.in_frame = node.rx_dv;
            ports[i]->sample(c);
        }
        sw->drive(c, eth.edge_ps());   // the switch on the same clock, a step of its own
        sw->sample(c, eth.edge_ps());
        eth.rise();
        for (int i = 0; i < n; i++) {
            up[i]->queue.publish(eth.next_rise_ps() - 1);
            down[i]->queue.publish(eth.next_rise_ps() - 1);
        }
    }
    sw.reset();   // writes the statistics
    return nodes;
}

int main() {
    GmiiLinkOptions opt;
    std::string error;
    CHECK(!opt.set("--eth-delay", "15", error) && error.find("at least 16") != std::string::npos);
    CHECK(opt.set("--eth-delay", "16", error) && opt.to_switch() == 1 && opt.from_switch() == 1);
    CHECK(!opt.set("--eth-loss", "1.5", error));
    CHECK(!opt.set("--eth-loss", "x", error));
    CHECK(!opt.set("--eth-reorder", "-0.1", error) && error.find("--eth-reorder") != std::string::npos);
    CHECK(!opt.set("--eth-frobnicate", "1", error) && error.find("unknown") != std::string::npos);
    CHECK(opt.set("--eth-duplicate", "0.25", error) && opt.duplicate == 0.25);
    CHECK(opt.set("--eth-reorder", "0", error) && opt.reorder == 0);
    opt.duplicate = 0;
    CHECK(opt.set("--eth-delay", "40", error) && opt.delay == 40);

    // Forwarding by destination MAC, after the delay, byte for byte.
    auto a = frame(1, 0, 70, 1), b = frame(2, 0, 64, 9), c = frame(0, 2, 64, 5);
    auto nodes = run(3, {{a, b}, {}, {c}}, opt, 600);
    CHECK(nodes[1].received.size() == 1 && nodes[1].received[0] == a);
    CHECK(nodes[2].received.size() == 1 && nodes[2].received[0] == b);
    CHECK(nodes[0].received.size() == 1 && nodes[0].received[0] == c);
    CHECK(nodes[1].starts[0] == 40);   // sent from cycle 0, delay 40

    // Two nodes sending to the same node at once: one frame waits for the other and the gap.
    auto x = frame(2, 0, 100, 1), y = frame(2, 1, 100, 2);
    nodes = run(3, {{x}, {y}, {}}, opt, 600);
    CHECK(nodes[2].received.size() == 2 && nodes[2].received[0] == x && nodes[2].received[1] == y);
    CHECK(nodes[2].starts[1] >= nodes[2].starts[0] + x.size() + 12);

    // Unknown destinations are dropped.
    nodes = run(2, {{frame(7, 0, 64, 1)}, {}}, opt, 300);
    CHECK(nodes[1].received.empty());

    // Corruption flips one bit after the SFD; loss drops whole frames; a seed repeats itself.
    GmiiLinkOptions bad = opt;
    bad.corrupt = 1.0;
    nodes = run(2, {{a}, {}}, bad, 300);
    CHECK(nodes[1].received.size() == 1 && nodes[1].received[0].size() == a.size());
    int diff_bits = 0, first_diff = -1;
    for (size_t i = 0; i < a.size(); i++) {
        uint8_t d = a[i] ^ nodes[1].received[0][i];
        if (d && first_diff < 0) first_diff = int(i);
        diff_bits += __builtin_popcount(d);
    }
    CHECK(diff_bits == 1 && first_diff >= 8);
    GmiiLinkOptions lossy = opt;
    lossy.loss = 0.5;
    lossy.seed = 42;
    std::vector<std::vector<uint8_t>> many(40, frame(1, 0, 64, 3));
    auto r1 = run(2, {many, {}}, lossy, 5000), r2 = run(2, {many, {}}, lossy, 5000);
    CHECK(r1[1].received.size() > 5 && r1[1].received.size() < 35);
    CHECK(r1[1].starts == r2[1].starts);

    // Duplication delivers the same frame twice, the copy after the original and a gap.
    GmiiLinkOptions twice = opt;
    twice.duplicate = 1.0;
    nodes = run(2, {{a}, {}}, twice, 600);
    CHECK(nodes[1].received.size() == 2 && nodes[1].received[0] == a && nodes[1].received[1] == a);
    CHECK(nodes[1].starts[1] >= nodes[1].starts[0] + a.size() + 12);
    // A corrupted frame's copy is corrupted too, and counted so: a receiver's bad-FCS count must
    // equal the switch's.
    GmiiLinkOptions twice_bad = twice;
    twice_bad.corrupt = 1.0;
    const std::string stats_path = "test_gmii_link_stats.json";
    nodes = run(2, {{a}, {}}, twice_bad, 600, stats_path);
    CHECK(nodes[1].received.size() == 2 && nodes[1].received[0] == nodes[1].received[1] && nodes[1].received[0] != a);
    CHECK(slurp(stats_path).find("\"delivered\": 2, \"lost\": 0, \"corrupted\": 2, \"duplicated\": 1") !=
          std::string::npos);

    // Reordering: a held frame goes right behind the next frame to its port, every frame arrives
    // once and intact; a frame with nothing behind it is late, not lost.
    std::vector<std::vector<uint8_t>> numbered;
    for (int i = 0; i < 30; i++) numbered.push_back(frame(1, 0, 64, uint8_t(16 * i)));
    GmiiLinkOptions shuffled = opt;
    shuffled.reorder = 0.3;
    shuffled.seed = 9;
    nodes = run(2, {numbered, {}}, shuffled, 6000);
    std::vector<std::vector<uint8_t>> sorted_rx = nodes[1].received, sorted_tx = numbered;
    std::sort(sorted_rx.begin(), sorted_rx.end());
    std::sort(sorted_tx.begin(), sorted_tx.end());
    CHECK(sorted_rx == sorted_tx);          // each frame exactly once, byte for byte
    CHECK(nodes[1].received != numbered);   // ... but not all in the order sent
    GmiiLinkOptions always = opt;
    always.reorder = 1.0;
    nodes = run(2, {{a, b = frame(1, 0, 64, 9)}, {}}, always, 30000);
    CHECK(nodes[1].received.size() == 2 && nodes[1].received[0] == b && nodes[1].received[1] == a);
    nodes = run(2, {{a}, {}}, always, 30000);
    CHECK(nodes[1].received.size() == 1 && nodes[1].received[0] == a && nodes[1].starts[0] >= 20000);
    std::printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
