// Runs the entities of one process: each steps as far as its inputs allow (conservative
// synchronisation: a node may run ahead of a neighbour by the link's latency, no further; there is
// no barrier per cycle), then the next one. With nothing to simulate the process sleeps until a
// producer in another process rings it (shared memory) or records arrive (MPI).
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "arena.hpp"
#include "entity.hpp"

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
}

// Channels to and from other MPI ranks (mpi_transport.hpp); absent in shared-memory runs.
class Relay {
public:
    virtual ~Relay() = default;
    // Send what local producers published on channels other ranks consume; take in what other
    // ranks sent. True if anything came in.
    virtual bool exchange() = 0;
    // Every local entity has stopped: deliver the last records and wait until the others are through.
    virtual void finish() = 0;
    // Node cycles of the whole run, for the progress line (rank 0); others send theirs.
    virtual void share_status(Arena &arena) = 0;
};

struct SchedulerOptions {
    int process = 0;
    bool shared_memory = false;    // other processes map the same arena
    double wall_limit = 0;         // seconds (0: none)
    uint64_t progress_every = 0;   // print a progress line each time the slowest node passes a multiple
    uint64_t sys_period_ps = 10000;
};

class Scheduler {
public:
    using StopRequest = std::function<void(const std::string &reason, int code)>;

    Scheduler(Arena &arena, const SchedulerOptions &opt, Relay *relay) : arena_(arena), opt_(opt), relay_(relay) {}

    // `remote`: processes that consume one of the entity's outputs (rung after it publishes).
    void add(Entity *e, std::vector<int> remote) { entities_.push_back({e, std::move(remote), 0}); }
    // Called with the reason when the run must stop early (wall-time limit, signal); the process
    // that runs the hub turns it into a stop at a simulated time every node agrees on.
    void on_stop_request(StopRequest f) { stop_request_ = std::move(f); }
    // `node_cycle(i)`: the sys cycle of local node i, for the status board.
    void track(int node, std::function<uint64_t()> cycle) { tracked_.push_back({node, std::move(cycle)}); }

    static void install_signal_handlers() {
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
    }
    static int signal_received() { return g_signal; }

    void run() {
        start_ = last_housekeeping_ = std::chrono::steady_clock::now();
        cpu_start_ = process_cpu_seconds();
        for (Slot &s : entities_) {   // before its first edge, no entity has sent anything
            s.entity->publish();
            if (opt_.shared_memory)
                for (int p : s.remote) arena_.ring(p);
        }
        for (;;) {
            const uint32_t seen = opt_.shared_memory ? arena_.doorbell(opt_.process).seq.load() : 0;
            bool progress = false, running = false;
            for (Slot &s : entities_) {
                int n = 0;
                while (n < kBatch && s.entity->can_step()) {
                    s.entity->step();
                    n++;
                }
                if (n) {
                    progress = true;
                    s.entity->publish();
                    if (opt_.shared_memory)
                        for (int p : s.remote) arena_.ring(p);
                    if ((s.steps += n) >= kPollEvery) {
                        s.steps = 0;
                        s.entity->poll();
                    }
                }
                running |= !s.entity->stopped();
            }
            if (relay_) progress |= relay_->exchange();
            if (progress) idle_rounds_ = 0;
            if (!running || abandoned_) break;
            housekeeping(!progress);
            if (!progress) wait(seen);
        }
        publish_status();
        cpu_seconds_ = process_cpu_seconds() - cpu_start_;
        if (relay_ && !abandoned_) relay_->finish();
    }

    // The processor time this process spent in run(), waiting included: on a machine with more
    // processes than free cores it is the cost of the simulation where wall time is not.
    double cpu_seconds() const { return cpu_seconds_; }

    static double process_cpu_seconds() {
        timespec t{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return t.tv_sec + t.tv_nsec * 1e-9;
    }

    double wall_seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    static constexpr int kBatch = 4096;           // edges an entity runs before the next gets a turn
    static constexpr uint64_t kPollEvery = 256;   // edges between an entity's polls
    static constexpr std::chrono::microseconds kSpin{200};
    static constexpr int kPauseRounds = 256;   // of cpu_relax(): a few microseconds
    static constexpr std::chrono::seconds kGiveUp{10};
    static constexpr int kYieldRounds = 20000;   // MPI: idle rounds before sleeping between polls

    struct Slot {
        Entity *entity;
        std::vector<int> remote;
        uint64_t steps;
    };
    struct Tracked {
        int node;
        std::function<uint64_t()> cycle;
    };

    static void on_signal(int sig) { g_signal = sig; }
    static inline volatile std::sig_atomic_t g_signal = 0;

    void housekeeping(bool idle) {
        const auto now = std::chrono::steady_clock::now();
        if (!idle && now - last_housekeeping_ < std::chrono::milliseconds(20)) return;
        last_housekeeping_ = now;
        if (idle)
            for (Slot &s : entities_) s.entity->poll();
        publish_status();
        if (relay_ && now - last_status_ > std::chrono::milliseconds(500)) {
            relay_->share_status(arena_);
            last_status_ = now;
        }
        if (stop_request_) {
            if (g_signal) stop_request_(g_signal == SIGINT ? "interrupted" : "terminated", 130);
            else if (opt_.wall_limit > 0 && wall_seconds() > opt_.wall_limit)
                stop_request_("wall-time limit reached", 4);
        } else if (g_signal) {
            // The hub's process stops the run; if no stop has come after a while, that process
            // is gone or stuck: leave.
            if (signalled_at_ == std::chrono::steady_clock::time_point{}) signalled_at_ = now;
            else if (now - signalled_at_ > kGiveUp) abandoned_ = true;
        }
        if (opt_.progress_every && opt_.process == 0) print_progress();
    }

    void publish_status() {
        for (const Tracked &t : tracked_) arena_.status(t.node).sys_cycle.store(t.cycle(), std::memory_order_relaxed);
    }

    void print_progress() {
        uint64_t slowest = UINT64_MAX, total = 0;
        int slowest_node = 0;
        for (int i = 0; i < arena_.nodes(); i++) {
            const uint64_t c = arena_.status(i).sys_cycle.load(std::memory_order_relaxed);
            total += c;
            if (c < slowest) {
                slowest = c;
                slowest_node = i;
            }
        }
        if (slowest / opt_.progress_every == last_progress_ / opt_.progress_every) return;
        last_progress_ = slowest;
        const double wall = wall_seconds();
        std::fprintf(stderr, "sim: %llu cycles (slowest: node %d), %.0f cycles/s, %.0f node-cycles/s\n",
                     (unsigned long long)slowest, slowest_node, slowest / (wall > 0 ? wall : 1),
                     total / (wall > 0 ? wall : 1));
    }

    // Nothing to simulate until another process publishes. The next publish is usually a few
    // cycles of simulation away, so poll for a while before sleeping: a sleep and a wake-up cost
    // more than those cycles. Polling yields the processor, so that on a machine with fewer free
    // cores than processes the producer gets to run.
    void wait(uint32_t seen) {
        if (opt_.shared_memory) {
            const auto until = std::chrono::steady_clock::now() + kSpin;
            std::atomic<uint32_t> &seq = arena_.doorbell(opt_.process).seq;
            for (int round = 0; seq.load(std::memory_order_acquire) == seen; round++) {
                if (round < kPauseRounds) {
                    cpu_relax();
                } else if (std::chrono::steady_clock::now() < until) {
                    sched_yield();
                } else {
                    arena_.sleep(opt_.process, seen, 2'000'000);
                    break;
                }
            }
        } else if (relay_) {   // MPI: the next exchange() polls; give way meanwhile
            if (++idle_rounds_ < kYieldRounds) sched_yield();
            else std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }

    Arena &arena_;
    SchedulerOptions opt_;
    Relay *relay_;
    std::vector<Slot> entities_;
    std::vector<Tracked> tracked_;
    StopRequest stop_request_;
    double cpu_start_ = 0, cpu_seconds_ = 0;
    std::chrono::steady_clock::time_point start_, last_housekeeping_, last_status_, signalled_at_{};
    bool abandoned_ = false;
    int idle_rounds_ = 0;
    uint64_t last_progress_ = 0;
};
