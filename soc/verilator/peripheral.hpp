// What the harness drives around the nodes: consoles, host bridges, ring links, Ethernet links.
//
// Each peripheral belongs to one clock domain. Around every rising edge of that clock the
// harness calls drive() (set model inputs for this cycle), evaluates the model, calls sample()
// (read model outputs as the flops will see them at the edge), then raises the clock.
#pragma once

#include <cstdint>

class Peripheral {
public:
    virtual ~Peripheral() = default;
    // Cycle counts are of the peripheral's own clock domain.
    virtual void drive(uint64_t cycle) { (void)cycle; }
    virtual void sample(uint64_t cycle) { (void)cycle; }
    // Called every few hundred sys cycles, for work that need not be cycle-exact (sockets, files).
    virtual void poll() {}
};
