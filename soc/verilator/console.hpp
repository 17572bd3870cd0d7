// Per-node UART console: assembles lines, prints them with a node prefix, saves them to a log
// file and notes the cycle at which a marker line first appears.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "peripheral.hpp"

template <typename Pads>
class Console : public Peripheral {
public:
    Console(Pads &pads, int node, const std::string &log_path, const std::string &marker, bool echo)
        : pads_(pads), node_(node), marker_(marker), echo_(echo) {
        log_ = std::fopen(log_path.c_str(), "w");
        if (!log_) {
            std::fprintf(stderr, "sim: cannot write %s\n", log_path.c_str());
            std::exit(1);
        }
    }
    ~Console() {
        flush_partial();
        if (log_) std::fclose(log_);
    }
    Console(const Console &) = delete;
    Console &operator=(const Console &) = delete;

    void drive(uint64_t) override {
        *pads_.serial_source_ready = 1;
        *pads_.serial_sink_valid = 0;
    }
    void sample(uint64_t cycle) override {
        if (*pads_.serial_source_valid) put(*pads_.serial_source_data, cycle);
    }

    void put(uint8_t byte, uint64_t cycle) {
        if (byte == '\r') return;
        if (byte != '\n') {
            line_.push_back(static_cast<char>(byte));
            return;
        }
        emit(cycle);
    }

    bool marker_seen() const { return marker_cycle_ != UINT64_MAX; }
    uint64_t marker_cycle() const { return marker_cycle_; }
    int node() const { return node_; }

private:
    void emit(uint64_t cycle) {
        if (echo_) std::printf("[n%d] %s\n", node_, line_.c_str());
        std::fprintf(log_, "%s\n", line_.c_str());
        std::fflush(log_);
        if (!marker_.empty() && !marker_seen() && line_.find(marker_) != std::string::npos)
            marker_cycle_ = cycle;
        line_.clear();
    }
    void flush_partial() {
        if (!line_.empty()) emit(UINT64_MAX - 1);
    }

    Pads &pads_;
    int node_;
    std::string marker_;
    bool echo_;
    std::FILE *log_ = nullptr;
    std::string line_;
    uint64_t marker_cycle_ = UINT64_MAX;
};
