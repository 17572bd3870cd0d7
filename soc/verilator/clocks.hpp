// Clock domains of a model: each a clock input with its own period. Every clock starts low at
// time 0, so all nodes of a ring have their edges at the same picoseconds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
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
    uint64_t period_ps() const { return spec_.period_ps; }
    uint64_t cycle() const { return cycle_; }
    bool high() const { return high_; }
    uint64_t next_toggle_ps() const { return next_toggle_ps_; }
    uint64_t next_rise_ps() const { return high_ ? next_toggle_ps_ + spec_.period_ps / 2 : next_toggle_ps_; }
    // While an edge is being processed (drive and sample), the time of that edge.
    uint64_t edge_ps() const { return next_toggle_ps_; }
    void add(Peripheral *p) { peripherals_.push_back(p); }

    void fall() {
        *spec_.clk = 0;
        high_ = false;
        next_toggle_ps_ += spec_.period_ps / 2;
    }
    void drive() {
        for (auto *p : peripherals_) p->drive(cycle_);
    }
    void sample() {
        for (auto *p : peripherals_) p->sample(cycle_);
    }
    void rise() {
        *spec_.clk = 1;
        high_ = true;
        cycle_++;
        next_toggle_ps_ += spec_.period_ps / 2;
    }
    void poll() {
        for (auto *p : peripherals_) p->poll();
    }

private:
    ClockSpec spec_;
    uint64_t next_toggle_ps_;
    uint64_t cycle_ = 0;
    bool high_ = false;
    std::vector<Peripheral *> peripherals_;
};

// Every domain of one model, stepped one rising edge (of one or more domains) at a time, as the
// model sees them: falls set the clock low; at a rise the domain's peripherals drive the model's
// inputs, the model settles, the peripherals sample its outputs, and the clock rises.
//
// The model is evaluated once per rising edge, plus once to settle before the sample when the
// peripherals changed an input: with the inputs as they were, its outputs are those of its last
// evaluation (the model has no logic on falling edges). `Inputs` is the generated snapshot of the
// model's inputs (model_ports.h: ModelInputs, nv_inputs_changed, nv_note_clocks_low).
template <typename Model, typename Inputs>
class Clocks {
public:
    Clocks(Model *model, const std::vector<ClockSpec> &specs) : model_(model) {
        for (const ClockSpec &s : specs) domains_.emplace_back(s);
    }
    // After the caller set the inputs and evaluated the model.
    void settled() { nv_inputs_changed(model_, last_); }
    ClockDomain &operator[](size_t i) { return domains_[i]; }
    ClockDomain *find(const char *name) {
        for (auto &d : domains_)
            if (std::string(d.spec().name) == name) return &d;
        return nullptr;
    }
    std::vector<ClockDomain> &domains() { return domains_; }

    uint64_t next_rise_ps() const {
        uint64_t t = UINT64_MAX;
        for (const auto &d : domains_) t = std::min(t, d.next_rise_ps());
        return t;
    }
    // The rising edge(s) at next_rise_ps(); `before_eval` runs once the edge's time is known.
    template <typename Hook>
    void step(Hook before_eval) {
        const uint64_t t = next_rise_ps();
        for (auto &d : domains_)
            if (d.high() && d.next_toggle_ps() <= t) d.fall();
        before_eval(t);
        for (auto &d : domains_)
            if (d.next_toggle_ps() == t) d.drive();
        if (nv_inputs_changed(model_, last_) || !nv_note_clocks_low(model_)) model_->eval();
        for (auto &d : domains_)
            if (d.next_toggle_ps() == t) d.sample();
        for (auto &d : domains_)
            if (d.next_toggle_ps() == t) d.rise();
        model_->eval();
    }

private:
    Model *model_;
    std::vector<ClockDomain> domains_;
    Inputs last_{};
};
