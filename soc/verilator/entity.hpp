// A simulated entity (a node, the hub): something with clock edges that reads and writes
// channels. The scheduler steps it one rising edge at a time, whenever every channel it reads is
// complete up to that edge.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "channel.hpp"

class Entity {
public:
    virtual ~Entity() = default;

    // Picoseconds of the next rising edge this entity will process; kForever once stopped.
    virtual uint64_t next_edge() const = 0;
    // Process that edge: drive inputs, evaluate, sample outputs, push records.
    virtual void step() = 0;
    // Work that need not be cycle-exact (sockets, files), called every few hundred edges and
    // whenever the process has nothing to simulate.
    virtual void poll() {}
    virtual std::string name() const = 0;

    bool stopped() const { return next_edge() == kForever; }

    // True when every input is complete up to the next edge.
    bool can_step() const {
        const uint64_t t = next_edge();
        if (t == kForever) return false;
        for (const Inlet &in : inputs_)
            if (!in.complete_until(t)) return false;
        return true;
    }
    // Promise the consumers that nothing more comes before the next edge.
    void publish() {
        const uint64_t t = next_edge();
        const uint64_t watermark = t == kForever ? kForever : t - 1;
        for (Queue *q : outputs_) q->publish(watermark);
    }

    const std::vector<Inlet> &inputs() const { return inputs_; }
    const std::vector<Queue *> &outputs() const { return outputs_; }

protected:
    void add_input(Queue &q, uint64_t latency_ps) { inputs_.push_back({&q, latency_ps}); }
    void add_output(Queue &q) { outputs_.push_back(&q); }

private:
    std::vector<Inlet> inputs_;
    std::vector<Queue *> outputs_;
};
