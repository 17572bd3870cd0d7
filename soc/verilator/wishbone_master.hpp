// A Wishbone classic initiator driven by the harness: one access at a time, result on ack/err.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include "verilated.h"

struct BusOp {
    bool write;
    uint32_t byte_addr;
    uint32_t data;   // write data, or read result
    bool error = false;
};

// A model input of any width up to 32 bits (Verilator types ports by width).
struct InputPort {
    template <typename T>
    InputPort(T *port) : set([port](uint32_t value) { *port = T(value); }) {}
    std::function<void(uint32_t)> set;
};

// The model ports of one Wishbone target, word addressed, 32-bit data.
struct WishbonePins {
    CData *cyc, *stb, *we, *sel, *ack, *err;
    InputPort adr;
    IData *dat_w, *dat_r;
};

class WishboneMaster {
public:
    explicit WishboneMaster(const WishbonePins &pins) : p_(pins) {}

    // Queue an access; finished ops are collected with pop_done().
    void submit(const BusOp &op) { pending_.push_back(op); }
    bool idle() const { return pending_.empty() && !busy_; }
    bool has_done() const { return !done_.empty(); }
    BusOp pop_done() {
        BusOp op = done_.front();
        done_.pop_front();
        return op;
    }

    // Before the rising edge: drive the next access.
    void drive() {
        if (!busy_ && !pending_.empty()) {
            current_ = pending_.front();
            pending_.pop_front();
            busy_ = true;
        }
        *p_.cyc = busy_;
        *p_.stb = busy_;
        if (busy_) {
            *p_.we = current_.write;
            p_.adr.set(current_.byte_addr >> 2);
            *p_.dat_w = current_.data;
            *p_.sel = 0xF;
        }
    }

    // Before the rising edge, after eval: the access completes on this edge if ack or err is up.
    void sample() {
        if (!busy_) return;
        if (*p_.ack || *p_.err) {
            current_.error = *p_.err;
            if (!current_.write) current_.data = *p_.dat_r;
            done_.push_back(current_);
            busy_ = false;
        }
    }

private:
    WishbonePins p_;
    std::deque<BusOp> pending_, done_;
    BusOp current_{};
    bool busy_ = false;
};
