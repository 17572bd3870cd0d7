// Clock domains of the cluster model: each a top-level clock input with its own period.
#pragma once

#include <cstdint>
#include <vector>

#include "verilated.h"
#include "peripheral.hpp"

struct ClockSpec {
    const char *name;
    uint64_t period_ps;
    CData *clk;
};

class ClockDomain {
public:
    explicit ClockDomain(const ClockSpec &spec) : spec_(spec), next_toggle_ps_(spec.period_ps / 2) {}
    const ClockSpec &spec() const { return spec_; }
    uint64_t cycle() const { return cycle_; }
    uint64_t next_toggle_ps() const { return next_toggle_ps_; }
    bool rising_next() const { return !high_; }
    void add(Peripheral *p) { peripherals_.push_back(p); }

    void fall() {
        *spec_.clk = 0;
        high_ = false;
        next_toggle_ps_ += spec_.period_ps / 2;
    }
    void drive() { for (auto *p : peripherals_) p->drive(cycle_); }
    void sample() { for (auto *p : peripherals_) p->sample(cycle_); }
    void rise() {
        *spec_.clk = 1;
        high_ = true;
        cycle_++;
        next_toggle_ps_ += spec_.period_ps / 2;
    }

private:
    ClockSpec spec_;
    uint64_t next_toggle_ps_;
    uint64_t cycle_ = 0;
    bool high_ = false;
    std::vector<Peripheral *> peripherals_;
};
