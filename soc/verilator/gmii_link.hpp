// Gigabit Ethernet between the nodes: every node's GMII port on one cut-through switch, which
// lives in the hub.
//
// Each cycle of the 125 MHz eth clock a node's transmitter end sends the byte the node transmits
// (when tx_en is up) over its channel to the switch, and its receiver end drives the byte the
// switch sent it. The switch takes the bytes of each port and, once a frame's destination MAC is
// in (byte 14 after preamble and SFD), forwards it to the node that MAC names (locally
// administered 02:4e:56:00:00:<node>; broadcast goes to every other node, other MACs are dropped).
// A frame leaves the switch `delay` cycles after it entered (PHY + cable latency of both ends),
// after the frame ahead of it on that port plus the 12-byte gap. Of the delay, kRouteCycles are
// spent in the switch and the rest is split between the channels to and from it, which is the
// lookahead that lets the nodes run ahead of the switch.
//
// Faults for reliability tests: each forwarded frame is lost with probability `loss`, gets one
// bit flipped (after the SFD, so the FCS check catches it) with probability `corrupt`, is sent
// twice with probability `duplicate`, or is held back with probability `reorder` until the next
// frame to the same port has overtaken it (or `kHoldLimit` cycles have passed, so a lone frame is
// late, not lost). Every draw comes from one generator seeded with `seed`, drawn in the order the
// switch routes frames, which does not depend on how the ring is spread over processes: the same
// seed gives the same faults at the same cycles. Counts go to eth_link.json in the run folder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "channel.hpp"
#include "clocks.hpp"
#include "peripheral.hpp"

struct GmiiLinkOptions {
    uint64_t delay = 50;    // eth cycles from a byte entering the switch to it leaving
    double loss = 0;        // probability that a frame is lost
    double corrupt = 0;     // probability that a frame gets a bit flipped
    double duplicate = 0;   // probability that a frame is delivered twice
    double reorder = 0;     // probability that a frame is overtaken by the next one to its port
    uint64_t seed = 1;

    static constexpr uint64_t kRouteCycles = NV_ETH_ROUTE_CYCLES;   // the switch has read the destination MAC
    static constexpr uint64_t kMinDelay = kRouteCycles + 2;         // and each channel takes at least a cycle

    // Eth cycles on the channel into the switch and out of it.
    uint64_t to_switch() const { return (delay - kRouteCycles) / 2; }
    uint64_t from_switch() const { return delay - kRouteCycles - to_switch(); }

    static bool accepts(const std::string &name) { return name.rfind("--eth-", 0) == 0; }

    // Set the option `name` (--eth-delay/-loss/-corrupt/-duplicate/-reorder/-seed); false and
    // `error` if bad.
    bool set(const std::string &name, const std::string &value, std::string &error) {
        char *end = nullptr;
        if (name == "--eth-delay" || name == "--eth-seed") {
            unsigned long long v = std::strtoull(value.c_str(), &end, 0);
            if (end == value.c_str() || *end) return fail(error, name, value);
            if (name == "--eth-delay") {
                if (v < kMinDelay) {
                    error = name + " must be at least " + std::to_string(kMinDelay) + " cycles";
                    return false;
                }
                delay = v;
            } else {
                seed = v;
            }
            return true;
        }
        double *probability = name == "--eth-loss"        ? &loss
                              : name == "--eth-corrupt"   ? &corrupt
                              : name == "--eth-duplicate" ? &duplicate
                              : name == "--eth-reorder"   ? &reorder
                                                          : nullptr;
        if (probability) {
            double v = std::strtod(value.c_str(), &end);
            if (end == value.c_str() || *end || v < 0 || v > 1) return fail(error, name, value);
            *probability = v;
            return true;
        }
        error = "unknown argument " + name;
        return false;
    }

private:
    static bool fail(std::string &error, const std::string &name, const std::string &value) {
        error = "bad value '" + value + "' for " + name;
        return false;
    }
};

// A node's end: what it transmits goes to the switch, what the switch sends comes in.
class GmiiPort : public Peripheral {
public:
    GmiiPort(CData *tx_en, CData *tx_data, CData *rx_dv, CData *rx_data, Queue &to_switch, const Inlet &from_switch,
             const ClockDomain &clock)
        : tx_en_(tx_en), tx_data_(tx_data), rx_dv_(rx_dv), rx_data_(rx_data), out_(to_switch), in_(from_switch),
          clock_(clock) {}

    void drive(uint64_t) override {
        uint8_t dv = 0, data = 0;
        while (const Record *r = in_.due(clock_.edge_ps())) {
            dv = 1;
            data = uint8_t(r->a);
            in_.pop();
        }
        *rx_dv_ = dv;
        *rx_data_ = data;
    }
    void sample(uint64_t) override {
        if (*tx_en_ && !out_.push(clock_.edge_ps(), *tx_data_))
            throw std::runtime_error("Ethernet channel full: the switch lags too far behind");
    }

private:
    CData *tx_en_, *tx_data_, *rx_dv_, *rx_data_;
    Queue &out_;
    Inlet in_;
    const ClockDomain &clock_;
};

// The switch, stepped by the hub once per eth cycle: drive() sends this cycle's byte to each
// port, sample() takes the byte each port's node sent `to_switch` cycles ago.
class EthernetSwitch {
public:
    EthernetSwitch(std::vector<Inlet> inputs, std::vector<Queue *> outputs, const GmiiLinkOptions &opt,
                   std::string stats_path)
        : inputs_(std::move(inputs)), outputs_(std::move(outputs)), opt_(opt), stats_path_(std::move(stats_path)),
          rng_(opt.seed), in_(inputs_.size()), out_(inputs_.size()), stats_(inputs_.size()) {}

    ~EthernetSwitch() { write_stats(); }
    EthernetSwitch(const EthernetSwitch &) = delete;
    EthernetSwitch &operator=(const EthernetSwitch &) = delete;

    void drive(uint64_t cycle, uint64_t time) {
        for (size_t i = 0; i < out_.size(); i++) {
            Port &port = out_[i];
            if (port.held && cycle >= port.held->start + kHoldLimit) {
                port.held->start = cycle;   // nothing overtook it: it leaves now
                release_held(port);
            }
            while (!port.queue.empty()) {
                Scheduled &s = port.queue.front();
                if (s.start < port.free_at) s.start = port.free_at;   // after the previous frame and gap
                if (cycle < s.start) break;
                const uint64_t k = cycle - s.start;
                const Frame &f = *s.frame;
                if (f.complete && k >= f.bytes.size()) {   // sent whole: the next may start after a gap
                    port.free_at = cycle + kGap;
                    port.queue.pop_front();
                    continue;
                }
                if (k < f.bytes.size()) {
                    uint8_t data = f.bytes[k];
                    if (static_cast<int64_t>(k) == s.flip_byte) data ^= uint8_t(1u << s.flip_bit);
                    if (!outputs_[i]->push(time, data))
                        throw std::runtime_error("Ethernet channel full: a node lags too far behind the switch");
                }
                break;
            }
        }
    }

    void sample(uint64_t cycle, uint64_t time) {
        for (size_t i = 0; i < in_.size(); i++) {
            Port &port = in_[i];
            const Record *r = inputs_[i].due(time);
            if (r) {
                if (!port.current) {
                    port.current = std::make_shared<Frame>();
                    port.start = cycle;
                    port.routed = false;
                }
                port.current->bytes.push_back(uint8_t(r->a));
                inputs_[i].pop();
                if (!port.routed && port.current->bytes.size() == kDestinationEnd) route(int(i), port);
            } else if (port.current) {
                port.current->complete = true;
                if (!port.routed) stats_[i].runts++;   // ended before its destination MAC
                port.current.reset();
            }
        }
    }

private:
    static constexpr uint64_t kGap = 12;     // interframe gap, bytes
    static constexpr size_t kPreamble = 8;   // 7 x 0x55 and the SFD
    static constexpr size_t kDestinationEnd = kPreamble + 6;
    static constexpr uint64_t kHoldLimit = 20000;   // longest a reordered frame waits, eth cycles

    struct Frame {
        std::vector<uint8_t> bytes;   // as on the wire, preamble to FCS
        bool complete = false;
    };
    struct Scheduled {
        std::shared_ptr<Frame> frame;
        uint64_t start;
        int64_t flip_byte = -1;
        int flip_bit = 0;
    };
    struct Port {
        std::shared_ptr<Frame> current;   // input: the frame arriving
        uint64_t start = 0;
        bool routed = false;
        std::deque<Scheduled> queue;   // output: frames to send, in order
        uint64_t free_at = 0;
        std::unique_ptr<Scheduled> held;   // output: a frame the next one overtakes (reordering)
    };
    // Per receiving port, frames as they arrive: `delivered` and `corrupted` count copies too.
    struct Stats {
        uint64_t sent = 0, delivered = 0, lost = 0, corrupted = 0, duplicated = 0, reordered = 0, unknown = 0,
                 runts = 0;
    };

    static void release_held(Port &port) {
        port.queue.push_back(*port.held);
        port.held.reset();
    }

    void route(int src, Port &in) {
        in.routed = true;
        const std::vector<uint8_t> &b = in.current->bytes;
        const uint8_t *da = &b[kPreamble];
        stats_[src].sent++;
        static const uint8_t prefix[5] = {0x02, 0x4e, 0x56, 0x00, 0x00};
        bool broadcast = da[0] & 1;
        bool ours = std::equal(prefix, prefix + 5, da) && da[5] < out_.size() && da[5] != src;
        if (!broadcast && !ours) {
            stats_[src].unknown++;
            return;
        }
        for (size_t dst = 0; dst < out_.size(); dst++) {
            if (int(dst) == src || (!broadcast && dst != da[5])) continue;
            if (chance(opt_.loss)) {
                stats_[dst].lost++;
                continue;
            }
            Port &out = out_[dst];
            Scheduled s{in.current, in.start + GmiiLinkOptions::kRouteCycles};
            if (chance(opt_.corrupt)) {
                // A byte after the SFD: up to the shortest frame's length, so it is always inside.
                s.flip_byte = int64_t(kPreamble + next() % 60);
                s.flip_bit = int(next() % 8);
                stats_[dst].corrupted++;
            }
            stats_[dst].delivered++;
            if (!out.held && chance(opt_.reorder)) {
                stats_[dst].reordered++;
                out.held = std::make_unique<Scheduled>(s);
                continue;
            }
            out.queue.push_back(s);
            if (out.held) release_held(out);   // the frame held back goes right behind this one
            if (chance(opt_.duplicate)) {      // an exact copy: a corrupted frame's copy is corrupted too
                stats_[dst].duplicated++;
                stats_[dst].corrupted += s.flip_byte >= 0;
                stats_[dst].delivered++;
                out.queue.push_back(s);
            }
        }
    }

    uint64_t next() {   // splitmix64: small, fast and the same on every platform
        uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    bool chance(double p) { return p > 0 && double(next() >> 11) * 0x1.0p-53 < p; }

    void write_stats() {
        if (stats_path_.empty()) return;
        FILE *f = std::fopen(stats_path_.c_str(), "w");
        if (!f) return;
        std::fprintf(f,
                     "{\n  \"delay_cycles\": %llu, \"loss\": %g, \"corrupt\": %g, \"duplicate\": %g, "
                     "\"reorder\": %g, \"seed\": %llu,\n  \"ports\": [",
                     (unsigned long long)opt_.delay, opt_.loss, opt_.corrupt, opt_.duplicate, opt_.reorder,
                     (unsigned long long)opt_.seed);
        for (size_t i = 0; i < stats_.size(); i++) {
            const Stats &s = stats_[i];
            std::fprintf(f,
                         "%s\n    {\"sent\": %llu, \"delivered\": %llu, \"lost\": %llu, \"corrupted\": %llu, "
                         "\"duplicated\": %llu, \"reordered\": %llu, \"unknown_destination\": %llu, "
                         "\"runts\": %llu}",
                         i ? "," : "", (unsigned long long)s.sent, (unsigned long long)s.delivered,
                         (unsigned long long)s.lost, (unsigned long long)s.corrupted, (unsigned long long)s.duplicated,
                         (unsigned long long)s.reordered, (unsigned long long)s.unknown, (unsigned long long)s.runts);
        }
        std::fprintf(f, "\n  ]\n}\n");
        std::fclose(f);
    }

    std::vector<Inlet> inputs_;
    std::vector<Queue *> outputs_;
    GmiiLinkOptions opt_;
    std::string stats_path_;
    uint64_t rng_;
    std::vector<Port> in_, out_;
    std::vector<Stats> stats_;
};
