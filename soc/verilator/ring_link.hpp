// The SCI ring between the nodes' link ports: node i's tx reaches node (i+1) mod N's rx after a
// delay, as a 16-bit parallel link plus a frame bit would. Faults for reliability runs: random
// bit flips in symbols (seeded rate per symbol).
#pragma once

#include <cstdint>
#include <vector>

#include "peripheral.hpp"
#include "rng.hpp"

// One link port of a node: the value of a 17-bit SymbolLayout (data 15..0, frame 16).
struct RingPins {
    IData *tx;
    IData *rx;
};

class Ring : public Peripheral {
public:
    Ring(std::vector<RingPins> nodes, unsigned delay, double flip_rate, uint64_t seed)
        : nodes_(std::move(nodes)), delay_(delay ? delay : 1), flip_rate_(flip_rate), rng_(seed) {
        lines_.assign(nodes_.size(), std::vector<uint32_t>(delay_, 0));
    }

    void drive(uint64_t) override {
        for (size_t i = 0; i < nodes_.size(); i++) {
            const size_t from = (i + nodes_.size() - 1) % nodes_.size();
            *nodes_[i].rx = lines_[from][head_];
        }
    }

    void sample(uint64_t) override {
        for (size_t i = 0; i < nodes_.size(); i++) {
            uint32_t symbol = *nodes_[i].tx & 0x1FFFF;
            if ((symbol >> 16) && flip_rate_ > 0 && rng_.chance(flip_rate_)) {
                symbol ^= 1u << rng_.below(17);
                flips_++;
            }
            lines_[i][head_] = symbol;
        }
        head_ = (head_ + 1) % delay_;
    }

    uint64_t flips() const { return flips_; }

private:
    std::vector<RingPins> nodes_;
    unsigned delay_;
    double flip_rate_;
    Rng rng_;
    std::vector<std::vector<uint32_t>> lines_;   // per link, the last `delay_` symbols sent
    unsigned head_ = 0;
    uint64_t flips_ = 0;
};
