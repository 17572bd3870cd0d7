// The SCI ring between the nodes' link ports: node i's tx reaches node (i+1) mod N's rx `delay`
// sys cycles later, as a 16-bit parallel link plus a frame bit would. The transmitter end sends
// each non-idle symbol over the node's ring channel; the receiver end drives it into the next
// node `delay` cycles after it was sent.
//
// Faults for reliability runs, drawn at the receiver end from the link's own generator (seeded
// from the run's seed and the link's index, so the same seed gives the same faults whatever the
// processes): bit flips in packet symbols (rate per symbol); whole packets lost (their symbols
// arrive as idle); whole packets duplicated (an exact copy follows after one idle symbol). Echoes
// are packets too, so a lost echo makes its sender resend a packet the target already has. A copy
// is only written over symbols that are idle anyway, so it never disturbs other traffic: the
// receiver looks ahead by a packet, and the link must be longer than a packet for that.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "channel.hpp"
#include "clocks.hpp"
#include "peripheral.hpp"
#include "rng.hpp"

struct RingFaults {
    double flip_rate = 0;      // probability of a bit flip per packet symbol
    double drop = 0;           // probability that a packet is lost
    double duplicate = 0;      // probability that a packet arrives twice
    unsigned max_packet = 0;   // symbols of the longest packet (needed for duplicates)

    // Symbols the receiver must see ahead of the one leaving the link.
    unsigned lookahead() const { return duplicate > 0 ? max_packet + 1 : 0; }
};

struct RingFaultCounts {
    uint64_t flips = 0, packets = 0, dropped = 0, duplicated = 0;
};

constexpr uint32_t kRingSymbolMask = 0x1FFFF;   // data 15..0, frame 16 (sci_layouts.SymbolLayout)

class RingTransmitter : public Peripheral {
public:
    RingTransmitter(IData *tx, Queue &out, const ClockDomain &clock) : tx_(tx), out_(out), clock_(clock) {}
    void sample(uint64_t) override {
        const uint32_t symbol = *tx_ & kRingSymbolMask;
        if (symbol && !out_.push(clock_.edge_ps(), symbol))
            throw std::runtime_error("ring channel full: the next node lags too far behind");
    }

private:
    IData *tx_;
    Queue &out_;
    const ClockDomain &clock_;
};

class RingReceiver : public Peripheral {
public:
    // The latency the channel needs: the link's delay, less the symbols the receiver looks ahead.
    static uint64_t channel_latency_ps(unsigned delay, const RingFaults &faults, uint64_t period_ps) {
        if (delay < 1 || (faults.lookahead() && delay < faults.lookahead() + 1))
            throw std::invalid_argument("duplicating ring packets needs a ring delay of at least " +
                                        std::to_string(faults.lookahead() + 1) + " cycles");
        return uint64_t(delay - faults.lookahead()) * period_ps;
    }

    RingReceiver(IData *rx, const Inlet &in, const ClockDomain &clock, unsigned delay, const RingFaults &faults,
                 uint64_t seed)
        : rx_(rx), in_(in), clock_(clock), delay_ps_(uint64_t(delay) * clock.period_ps()), faults_(faults), rng_(seed) {
    }

    void drive(uint64_t) override {
        // When the symbol leaving now was sent (before time 0 early on: idle).
        const int64_t leaving = int64_t(clock_.edge_ps()) - int64_t(delay_ps_);
        fill(leaving + int64_t(faults_.lookahead() * clock_.period_ps()));
        *rx_ = leave();
        line_.pop_front();
    }

    const RingFaultCounts &counts() const { return counts_; }

private:
    static constexpr uint32_t kFrame = 1u << 16;

    // Symbols sent up to `until` (ps) into the line, with bit flips applied.
    void fill(int64_t until) {
        if (!filled_) next_ps_ = until - int64_t(faults_.lookahead() * clock_.period_ps());
        filled_ = true;
        for (; next_ps_ <= until; next_ps_ += int64_t(clock_.period_ps())) {
            uint32_t symbol = 0;
            while (const Record *r = in_.queue->peek()) {
                if (int64_t(r->time) > next_ps_) break;
                if (int64_t(r->time) == next_ps_) symbol = r->a;
                in_.pop();
            }
            if ((symbol & kFrame) && faults_.flip_rate > 0 && rng_.chance(faults_.flip_rate)) {
                symbol ^= 1u << rng_.below(17);
                counts_.flips++;
            }
            line_.push_back(symbol);
        }
    }

    // The symbol leaving the link now (line_.front()), with packet losses and copies applied.
    uint32_t leave() {
        const uint32_t symbol = line_.front();
        if (copy_left_) {
            copy_left_--;
            return symbol;
        }
        if (symbol & kFrame) {
            if (!in_packet_) {
                in_packet_ = true;
                packet_.clear();
                counts_.packets++;
                dropping_ = faults_.drop > 0 && rng_.chance(faults_.drop);
                counts_.dropped += dropping_;
            }
            packet_.push_back(symbol);
            return dropping_ ? 0 : symbol;
        }
        if (in_packet_) {
            in_packet_ = false;
            if (!dropping_ && faults_.duplicate > 0 && rng_.chance(faults_.duplicate) && copy_fits()) {
                // This idle symbol separates the two; the copy replaces the idle symbols after it.
                for (size_t k = 0; k < packet_.size(); k++) line_[1 + k] = packet_[k];
                copy_left_ = packet_.size();
                counts_.duplicated++;
            }
        }
        return symbol;
    }

    // The packet's copy and an idle symbol after it land on symbols that are idle anyway.
    bool copy_fits() const {
        if (packet_.size() + 1 >= line_.size()) return false;
        for (size_t k = 1; k <= packet_.size() + 1; k++)
            if (line_[k] & kFrame) return false;
        return true;
    }

    IData *rx_;
    Inlet in_;
    const ClockDomain &clock_;
    uint64_t delay_ps_;
    RingFaults faults_;
    Rng rng_;
    std::deque<uint32_t> line_;   // symbols from the one leaving now to the lookahead's end
    int64_t next_ps_ = 0;         // send time of the next symbol to fill in
    bool filled_ = false;
    bool in_packet_ = false, dropping_ = false;
    std::vector<uint32_t> packet_;   // the packet leaving, as sent (for a copy)
    size_t copy_left_ = 0;           // symbols of a copy still to leave (no faults on those)
    RingFaultCounts counts_;
};
