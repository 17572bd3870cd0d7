// The SCI ring between the nodes' link ports: node i's tx reaches node (i+1) mod N's rx after a
// delay, as a 16-bit parallel link plus a frame bit would.
//
// Faults for reliability runs, each drawn from one generator seeded by `seed` (same seed, same
// faults at the same cycles): bit flips in packet symbols (rate per symbol); whole packets lost
// (their symbols arrive as idle); whole packets duplicated (an exact copy follows after one idle
// symbol). Echoes are packets too, so a lost echo makes its sender resend a packet the target
// already has. Losses and copies are made where the symbols leave the delay line: a copy is only
// written over symbols that are idle anyway, so it never disturbs other traffic, and the line
// must be longer than the longest packet for it to fit.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "peripheral.hpp"
#include "rng.hpp"

// One link port of a node: the value of a 17-bit SymbolLayout (data 15..0, frame 16).
struct RingPins {
    IData *tx;
    IData *rx;
};

struct RingFaults {
    double flip_rate = 0;        // probability of a bit flip per packet symbol
    double drop = 0;             // probability that a packet is lost
    double duplicate = 0;        // probability that a packet arrives twice
    unsigned max_packet = 0;     // symbols of the longest packet (needed for duplicates)
};

struct RingFaultCounts {
    uint64_t flips = 0, packets = 0, dropped = 0, duplicated = 0;
};

class Ring : public Peripheral {
public:
    Ring(std::vector<RingPins> nodes, unsigned delay, const RingFaults &faults, uint64_t seed)
        : nodes_(std::move(nodes)), delay_(delay ? delay : 1), faults_(faults), rng_(seed),
          links_(nodes_.size()) {
        if (faults_.duplicate > 0 && delay_ < faults_.max_packet + 2)
            throw std::invalid_argument("duplicating ring packets needs a ring delay of at least " +
                                        std::to_string(faults_.max_packet + 2) + " cycles");
        for (Link &l : links_) l.line.assign(delay_, 0);
    }

    void drive(uint64_t) override {
        for (size_t i = 0; i < nodes_.size(); i++) {
            Link &l = links_[(i + nodes_.size() - 1) % nodes_.size()];
            *nodes_[i].rx = leave(l);
        }
    }

    void sample(uint64_t) override {
        for (size_t i = 0; i < nodes_.size(); i++) {
            uint32_t symbol = *nodes_[i].tx & 0x1FFFF;
            if ((symbol & kFrame) && faults_.flip_rate > 0 && rng_.chance(faults_.flip_rate)) {
                symbol ^= 1u << rng_.below(17);
                counts_.flips++;
            }
            links_[i].line[head_] = symbol;
        }
        head_ = (head_ + 1) % delay_;
    }

    const RingFaultCounts &counts() const { return counts_; }

private:
    static constexpr uint32_t kFrame = 1u << 16;

    struct Link {
        std::vector<uint32_t> line;     // the last `delay_` symbols sent; line[head_] leaves next
        bool in_packet = false, dropping = false;
        std::vector<uint32_t> packet;   // the packet leaving, as sent (for a copy)
        size_t copy_left = 0;           // symbols of a copy still to leave (no faults on those)
    };

    // The symbol leaving link `l` this cycle, with packet losses and copies applied.
    uint32_t leave(Link &l) {
        uint32_t symbol = l.line[head_];
        if (l.copy_left) {
            l.copy_left--;
            return symbol;
        }
        if (symbol & kFrame) {
            if (!l.in_packet) {
                l.in_packet = true;
                l.packet.clear();
                counts_.packets++;
                l.dropping = faults_.drop > 0 && rng_.chance(faults_.drop);
                counts_.dropped += l.dropping;
            }
            l.packet.push_back(symbol);
            return l.dropping ? 0 : symbol;
        }
        if (l.in_packet) {
            l.in_packet = false;
            if (!l.dropping && faults_.duplicate > 0 && rng_.chance(faults_.duplicate) && copy_fits(l)) {
                // This idle symbol separates the two; the copy replaces the idle symbols after it.
                for (size_t k = 0; k < l.packet.size(); k++) l.line[(head_ + 1 + k) % delay_] = l.packet[k];
                l.copy_left = l.packet.size();
                counts_.duplicated++;
            }
        }
        return symbol;
    }

    // The packet's copy and an idle symbol after it land on symbols that are idle anyway.
    bool copy_fits(const Link &l) const {
        if (l.packet.size() + 2 > delay_) return false;
        for (size_t k = 1; k <= l.packet.size() + 1; k++)
            if (l.line[(head_ + k) % delay_] & kFrame) return false;
        return true;
    }

    std::vector<RingPins> nodes_;
    unsigned delay_;
    RingFaults faults_;
    Rng rng_;
    std::vector<Link> links_;
    unsigned head_ = 0;
    RingFaultCounts counts_;
};
