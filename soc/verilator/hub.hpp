// The hub: the Ethernet switch between the nodes and the run's control, an entity of its own.
//
// Whatever concerns more than one node goes through the hub as control messages with the same
// latency as a channel, never through shared state: a node says it is ready, done, at a barrier,
// through with a step; the hub answers with start, barrier release, the next step, dump, stop.
// So every decision falls at a simulated time that does not depend on how the nodes are spread
// over processes or machines, and the run is the same bit for bit.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "arena.hpp"
#include "entity.hpp"
#include "gmii_link.hpp"

// Control messages: Record.a is the message, Record.b its argument.
enum Control : uint32_t {
    // node -> hub
    kReady = 1,         // booted (the firmware's ready line), or brought up (card bench)
    kDone,              // its traffic or trace is finished
    kDumped,            // its state is dumped (card bench)
    kBarrierArrive,     // b: barrier
    kStepDone,          // b: script step
    kBridgeConnected,   // a host connected to its bridge
    kBridgeDisconnected,
    kFailed,   // b: exit status (watchdog, bus error)
    // hub -> node
    kStart = 0x100,    // start the traffic or traces
    kBarrierRelease,   // b: barrier
    kRunStep,          // b: script step
    kDump,             // dump the state
    kStop,             // b: exit status
};

// What the run does after every node is ready.
struct RunPlan {
    bool start_after_ready = false;   // send kStart when every node is ready (traffic, traces)
    bool stop_when_ready = false;     // stop when every node is ready (and no traffic follows)
    bool stop_when_done = false;      // stop when every node is done (otherwise: keep serving)
    bool dump_when_done = false;      // card bench: kDump, then stop when every node has dumped
    std::vector<int> script;          // card bench: the node of each step, run one at a time
    bool until_disconnect = false;    // stop when the last host that connected disconnects
    bool limit_fails = false;         // the cycle limit is a failure even if every node was ready
};

class ControlPort {
public:
    ControlPort(Queue &up, const Inlet &down) : up_(up), down_(down) {}
    void send(uint64_t time, Control message, uint32_t arg = 0) {
        if (!up_.push(time, message, arg)) throw std::runtime_error("control channel full");
    }
    // Messages due by `time`, one at a time.
    const Record *due(uint64_t time) const { return down_.due(time); }
    void pop() const { down_.pop(); }

private:
    Queue &up_;
    Inlet down_;
};

class Hub : public Entity {
public:
    // `period_ps`: the eth clock's with Ethernet, else the nodes' sys clock; `to_hub`: the
    // channels' latency into the hub, in its cycles (the nodes apply the latency out of it).
    Hub(Arena &arena, uint64_t period_ps, uint64_t to_hub, const RunPlan &plan, const GmiiLinkOptions *eth,
        const std::string &out_dir)
        : clk_(ClockSpec{"hub", period_ps, &clk_pin_}), plan_(plan), nodes_(arena.nodes()), state_(nodes_) {
        const uint64_t up_ps = to_hub * period_ps;
        for (int i = 0; i < nodes_; i++) {
            control_in_.push_back({&arena.queue(Channel::ControlUp, i), up_ps});
            add_input(arena.queue(Channel::ControlUp, i), up_ps);
            control_out_.push_back(&arena.queue(Channel::ControlDown, i));
            add_output(arena.queue(Channel::ControlDown, i));
        }
        if (eth) {
            std::vector<Inlet> in;
            std::vector<Queue *> out;
            for (int i = 0; i < nodes_; i++) {
                in.push_back({&arena.queue(Channel::EthUp, i), up_ps});
                add_input(arena.queue(Channel::EthUp, i), up_ps);
                out.push_back(&arena.queue(Channel::EthDown, i));
                add_output(arena.queue(Channel::EthDown, i));
            }
            switch_ = std::make_unique<EthernetSwitch>(std::move(in), std::move(out), *eth, out_dir + "/eth_link.json");
        }
    }

    std::string name() const override { return "hub"; }
    uint64_t next_edge() const override { return stopped_ ? kForever : clk_.next_rise_ps(); }

    void step() override {
        const uint64_t t = clk_.next_rise_ps();
        if (clk_.high()) clk_.fall();
        for (int i = 0; i < nodes_; i++)
            while (const Record *r = control_in_[i].due(t)) {
                receive(i, *r, t);
                control_in_[i].pop();
            }
        if (switch_) {
            switch_->drive(clk_.cycle(), t);
            switch_->sample(clk_.cycle(), t);
        }
        decide(t);
        clk_.rise();
        if (!stopped_ && all_nodes_gone())   // each stopped at the cycle limit
            finish(t, "cycle limit reached", every_node_ready() && !plan_.limit_fails ? 0 : 3);
    }

    // Once stopped: why, with what exit status, and the time of the stop message.
    const std::string &reason() const { return reason_; }
    int exit_code() const { return exit_code_; }
    uint64_t start_time() const { return start_time_; }
    bool every_node_ready() const { return count(&NodeState::ready) == nodes_; }

    // Stop the run from outside the simulation (wall-time limit, signal).
    void request_stop(const std::string &reason, int code) {
        if (!stop_requested_) {
            stop_requested_ = true;
            requested_reason_ = reason;
            requested_code_ = code;
        }
    }

private:
    struct NodeState {
        bool ready = false, done = false, dumped = false, connected = false;
    };

    void receive(int node, const Record &r, uint64_t t) {
        NodeState &s = state_[node];
        switch (r.a) {
        case kReady: s.ready = true; break;
        case kDone: s.done = true; break;
        case kDumped: s.dumped = true; break;
        case kBarrierArrive:
            if (barriers_.size() <= r.b) barriers_.resize(r.b + 1, 0);
            if (++barriers_[r.b] == nodes_) broadcast(t, kBarrierRelease, r.b);
            break;
        case kStepDone:
            if (r.b == step_) next_step_pending_ = true;
            break;
        case kBridgeConnected:
            s.connected = true;
            ever_connected_ = true;
            break;
        case kBridgeDisconnected: s.connected = false; break;
        case kFailed:
            failure_ = int(r.b);
            failed_node_ = node;
            break;
        default: std::fprintf(stderr, "sim: hub: unknown control message %u from node %d\n", r.a, node); failure_ = 2;
        }
    }

    void decide(uint64_t t) {
        if (failure_) return stop(t, "node " + std::to_string(failed_node_) + " failed", failure_);
        if (stop_requested_) return stop(t, requested_reason_, requested_code_);
        if (phase_ == Phase::Booting && every_node_ready()) {
            if (!plan_.script.empty()) {
                phase_ = Phase::Script;
                start_time_ = t;
                run_step(t);
            } else if (plan_.start_after_ready) {
                phase_ = Phase::Running;
                start_time_ = t;
                broadcast(t, kStart);
            } else if (plan_.stop_when_ready) {
                return stop(t, "every node is ready", 0);
            } else {
                phase_ = Phase::Serving;
            }
        }
        if (phase_ == Phase::Script && next_step_pending_) {
            next_step_pending_ = false;
            if (++step_ < plan_.script.size()) run_step(t);
            else return stop(t, "script done", 0);
        }
        if (phase_ == Phase::Running && count(&NodeState::done) == nodes_) {
            if (plan_.dump_when_done) {
                phase_ = Phase::Dumping;
                broadcast(t, kDump);
            } else if (plan_.stop_when_done) {
                return stop(t, plan_.start_after_ready ? "every trace is done" : "done", 0);
            } else {
                phase_ = Phase::Serving;
            }
        }
        if (phase_ == Phase::Dumping && count(&NodeState::dumped) == nodes_) return stop(t, "done", 0);
        if (plan_.until_disconnect && ever_connected_ && count(&NodeState::connected) == 0)
            return stop(t, "the host disconnected", 0);
    }

    void run_step(uint64_t t) {
        const int node = plan_.script[step_];
        if (!control_out_[node]->push(t, kRunStep, step_)) throw std::runtime_error("control channel full");
    }

    void broadcast(uint64_t t, Control message, uint32_t arg = 0) {
        for (Queue *q : control_out_)
            if (!q->push(t, message, arg)) throw std::runtime_error("control channel full");
    }

    void stop(uint64_t t, const std::string &reason, int code) {
        broadcast(t, kStop, uint32_t(code));
        finish(t, reason, code);
    }
    void finish(uint64_t t, const std::string &reason, int code) {
        stopped_ = true;
        stop_time_ = t;
        reason_ = reason;
        exit_code_ = code;
    }

    // Every node has stopped by itself (cycle limit): its channels are closed and empty.
    bool all_nodes_gone() const {
        for (const Inlet &in : control_in_)
            if (in.queue->watermark() != kForever || in.queue->peek()) return false;
        return true;
    }

    int count(bool NodeState::*flag) const {
        int n = 0;
        for (const NodeState &s : state_) n += s.*flag;
        return n;
    }

    enum class Phase { Booting, Script, Running, Dumping, Serving };

    CData clk_pin_ = 0;   // the hub has no model: its clock drives nothing
    ClockDomain clk_;
    RunPlan plan_;
    int nodes_;
    std::vector<NodeState> state_;
    std::vector<Inlet> control_in_;
    std::vector<Queue *> control_out_;
    std::unique_ptr<EthernetSwitch> switch_;
    std::vector<int> barriers_;
    Phase phase_ = Phase::Booting;
    size_t step_ = 0;
    bool next_step_pending_ = false, ever_connected_ = false, stopped_ = false;
    bool stop_requested_ = false;
    std::string requested_reason_;
    int requested_code_ = 0;
    int failure_ = 0, failed_node_ = -1;
    uint64_t start_time_ = 0, stop_time_ = 0;
    std::string reason_;
    int exit_code_ = 0;
};
