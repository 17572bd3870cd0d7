// A Wishbone classic initiator driven by the harness: one access at a time, result on ack/err.
#pragma once

#include <cstdint>
#include <deque>

struct BusOp {
    bool write;
    uint32_t byte_addr;
    uint32_t data;       // write data, or read result
    bool error = false;
};

// `Pads` is the node's generated port struct (hostbridge_* members).
template <typename Pads>
class WishboneMaster {
public:
    // Queue an access; `done` ops are collected with pop_done().
    void submit(const BusOp &op) { pending_.push_back(op); }
    bool idle() const { return pending_.empty() && !busy_; }
    bool has_done() const { return !done_.empty(); }
    BusOp pop_done() { BusOp op = done_.front(); done_.pop_front(); return op; }

    // Before the rising edge: drive the next access.
    void drive(Pads &p) {
        if (!busy_ && !pending_.empty()) {
            current_ = pending_.front();
            pending_.pop_front();
            busy_ = true;
        }
        *p.hostbridge_cyc = busy_;
        *p.hostbridge_stb = busy_;
        if (busy_) {
            *p.hostbridge_we = current_.write;
            *p.hostbridge_adr = current_.byte_addr >> 2;
            *p.hostbridge_dat_w = current_.data;
            *p.hostbridge_sel = 0xF;
        }
    }

    // Before the rising edge, after eval: the access completes on this edge if ack or err is up.
    void sample(Pads &p) {
        if (!busy_) return;
        if (*p.hostbridge_ack || *p.hostbridge_err) {
            current_.error = *p.hostbridge_err;
            if (!current_.write) current_.data = *p.hostbridge_dat_r;
            done_.push_back(current_);
            busy_ = false;
        }
    }

private:
    std::deque<BusOp> pending_, done_;
    BusOp current_{};
    bool busy_ = false;
};
