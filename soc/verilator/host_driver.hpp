// Drives a card's host port with loads and stores (single words or bursts) from an op source,
// and optionally logs every completed access (node, address, read/write, value, issue and
// completion cycle, error).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>

#include "peripheral.hpp"
#include "rng.hpp"

// Bit positions of the host port's stream payloads (generated from host_port.py's layouts).
#include "host_port_layout.h"

struct HostPins {
    CData *req_valid, *req_ready, *wdata_valid, *wdata_ready, *resp_valid, *resp_ready;
    QData *req_payload, *wdata_payload, *resp_payload;
};

struct HostOp {
    bool write;
    uint32_t addr;        // host port byte address
    uint32_t value;       // write data (every word of a burst)
    uint32_t gap;         // idle cycles before issuing
    uint32_t words = 1;   // burst length
};

// What an op source answers: an op, nothing yet (ask again next cycle), or no more ops.
enum class Next { Op, Wait, End };

class HostDriver : public Peripheral {
public:
    using Source = std::function<Next(HostOp &, uint64_t cycle)>;

    HostDriver(int node, const HostPins &pins, Source source, std::FILE *log)
        : node_(node), p_(pins), source_(std::move(source)), log_(log) {}

    void enable() { enabled_ = true; }
    bool done() const { return finished_ && phase_ == Phase::Idle; }
    uint64_t completed() const { return completed_; }
    uint64_t errors() const { return errors_; }
    uint64_t memory_cycles() const { return memory_cycles_; }   // sum of access latencies
    // Cycles the access in flight has waited (0 when idle).
    uint64_t waiting(uint64_t now) const { return phase_ == Phase::Idle ? 0 : now - issued_; }
    const HostOp &current() const { return op_; }

    void drive(uint64_t cycle) override {
        *p_.req_valid = 0;
        *p_.wdata_valid = 0;
        *p_.resp_ready = phase_ == Phase::Response;
        if (!enabled_) return;
        if (phase_ == Phase::Idle && !finished_) {
            if (!have_op_) {
                const Next next = source_(op_, cycle);
                if (next == Next::End) finished_ = true;
                if (next != Next::Op) return;
                have_op_ = true;
                start_at_ = cycle + op_.gap;
            }
            if (cycle >= start_at_) {
                phase_ = Phase::Request;
                issued_ = cycle;
            }
        }
        if (phase_ == Phase::Request) {
            *p_.req_valid = 1;
            *p_.req_payload = uint64_t(op_.addr) << HP_REQ_ADDR_LSB | uint64_t(op_.write) << HP_REQ_WRITE_LSB |
                              uint64_t(op_.words) << HP_REQ_COUNT_LSB;
        } else if (phase_ == Phase::WriteData) {
            *p_.wdata_valid = 1;
            *p_.wdata_payload = uint64_t(op_.value) << HP_WDATA_DATA_LSB | uint64_t(0xF) << HP_WDATA_BE_LSB;
        }
    }

    void sample(uint64_t cycle) override {
        switch (phase_) {
        case Phase::Request:
            if (*p_.req_ready) {
                phase_ = op_.write ? Phase::WriteData : Phase::Response;
                beats_ = 0;
                error_ = false;
            }
            break;
        case Phase::WriteData:
            if (*p_.wdata_ready && ++beats_ == op_.words) phase_ = Phase::Response;
            break;
        case Phase::Response:
            if (*p_.resp_valid) {
                const uint64_t beat = *p_.resp_payload;
                if (beats_ == 0 || op_.write) first_data_ = uint32_t(beat >> HP_RESP_DATA_LSB);
                error_ |= beat >> HP_RESP_ERROR_LSB & 1;
                if (!(beat >> HP_RESP_LAST_LSB & 1)) {
                    beats_++;
                    break;
                }
                if (error_) errors_++;
                if (log_)
                    std::fprintf(log_, "%d %u %d %u %llu %llu %d\n", node_, op_.addr, op_.write,
                                 op_.write ? op_.value : first_data_, (unsigned long long)issued_,
                                 (unsigned long long)cycle, int(error_));
                memory_cycles_ += cycle - issued_;
                completed_++;
                have_op_ = false;
                phase_ = Phase::Idle;
            }
            break;
        case Phase::Idle: break;
        }
    }

private:
    enum class Phase { Idle, Request, WriteData, Response };
    int node_;
    HostPins p_;
    Source source_;
    std::FILE *log_;
    HostOp op_{};
    bool enabled_ = false, have_op_ = false, finished_ = false;
    Phase phase_ = Phase::Idle;
    uint64_t start_at_ = 0, issued_ = 0, completed_ = 0, errors_ = 0, memory_cycles_ = 0;
    uint32_t beats_ = 0, first_data_ = 0;
    bool error_ = false;
};
