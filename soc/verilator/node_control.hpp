// A node's end of its control channels to the hub (hub.hpp): what it tells the hub, and what the
// hub told it, as flags the node acts on at its next edge. It also keeps the trace players'
// barriers (trace_player.hpp).
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <vector>

#include "channel.hpp"
#include "clocks.hpp"
#include "hub.hpp"
#include "trace_player.hpp"

class NodeControl : public Barriers {
public:
    NodeControl(Queue &up, const Inlet &down, const ClockDomain &sys) : up_(up), down_(down), sys_(sys) {}

    void send(uint64_t time, Control message, uint32_t arg = 0) {
        if (!up_.push(time, message, arg)) throw std::runtime_error("control channel to the hub is full");
    }

    // Barriers: arrivals happen while the sys edge is processed.
    void arrive(uint32_t b) override { send(sys_.edge_ps(), kBarrierArrive, b); }
    bool released(uint32_t b) const override { return b < released_.size() && released_[b]; }

    // Take every message due by `time`.
    void receive(uint64_t time) {
        while (const Record *r = down_.due(time)) {
            switch (r->a) {
            case kStart: start = true; break;
            case kBarrierRelease:
                if (released_.size() <= r->b) released_.resize(r->b + 1, false);
                released_[r->b] = true;
                break;
            case kRunStep: steps.push_back(r->b); break;
            case kDump: dump = true; break;
            case kStop:
                stop = true;
                stop_code = int(r->b);
                break;
            default: throw std::runtime_error("unknown control message from the hub");
            }
            down_.pop();
        }
    }

    // What the hub said (the node clears what it has acted on).
    bool start = false, dump = false, stop = false;
    int stop_code = 0;
    std::deque<uint32_t> steps;

private:
    Queue &up_;
    Inlet down_;
    const ClockDomain &sys_;
    std::vector<bool> released_;
};
