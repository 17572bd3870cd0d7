// Runs a list of register accesses on one Wishbone port, in order: writes, reads into a
// variable, and polls (read again until a masked value matches).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include "peripheral.hpp"
#include "wishbone_master.hpp"

class BusScript : public Peripheral {
public:
    explicit BusScript(const WishbonePins &pins, int node) : master_(pins), node_(node) {}

    void write(uint32_t addr, uint32_t value) { steps_.push_back({Kind::Write, addr, value, 0, nullptr}); }
    void read(uint32_t addr, uint32_t *out) { steps_.push_back({Kind::Read, addr, 0, 0, out}); }
    void poll(uint32_t addr, uint32_t mask, uint32_t value) {
        steps_.push_back({Kind::Poll, addr, value, mask, nullptr});
    }
    bool idle() const { return steps_.empty() && !active_; }

    void drive(uint64_t) override {
        if (!active_ && !steps_.empty()) {
            step_ = steps_.front();
            steps_.pop_front();
            active_ = true;
            master_.submit({step_.kind == Kind::Write, step_.addr, step_.value});
        }
        master_.drive();
    }

    void sample(uint64_t) override {
        master_.sample();
        if (!master_.has_done()) return;
        BusOp op = master_.pop_done();
        if (op.error) {
            std::fprintf(stderr, "bench: node %d: bus error at register %#x\n", node_, op.byte_addr);
            std::exit(5);
        }
        if (step_.kind == Kind::Read && step_.out) *step_.out = op.data;
        if (step_.kind == Kind::Poll && (op.data & step_.mask) != step_.value) {
            master_.submit({false, step_.addr, 0});   // not yet: read again
            return;
        }
        active_ = false;
    }

private:
    enum class Kind { Write, Read, Poll };
    struct Step {
        Kind kind;
        uint32_t addr, value, mask;
        uint32_t *out;
    };
    WishboneMaster master_;
    int node_;
    std::deque<Step> steps_;
    Step step_{};
    bool active_ = false;
};
