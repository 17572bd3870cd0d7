// Every channel of a simulated ring, laid out in one block of memory, and who runs what.
//
// Entities: nodes 0..N-1 and the hub (the Ethernet switch and the run's control: ready, barriers,
// start and stop). Channels: the ring link from node i to node i+1, and per node one control
// channel and (with Ethernet) one GMII channel to the hub and one back. A process runs a
// contiguous block of nodes; process 0 also runs the hub.
//
// Several processes on one machine map the same file (in /dev/shm) and reach each other's queues
// directly; a process with nothing to simulate sleeps on its doorbell (a futex) until a producer
// rings it. Under MPI each rank has a private copy of the block and the transport relays the
// channels that cross ranks (mpi_transport.hpp).
#pragma once

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "channel.hpp"

struct alignas(64) Doorbell {
    std::atomic<uint32_t> seq;        // bumped by every producer that published to this process
    std::atomic<uint32_t> sleeping;   // the process waits on seq
    char pad[56];
};

// What every node publishes for the progress line (read by the process that prints it).
struct alignas(64) NodeStatus {
    std::atomic<uint64_t> sys_cycle;
    std::atomic<uint32_t> state;   // NodeState
    char pad[52];
};

enum NodeState : uint32_t { kNodeRunning = 0, kNodeStopped = 1 };

enum class Channel { Ring, EthUp, EthDown, ControlUp, ControlDown };

class Arena {
public:
    static constexpr uint64_t kMagic = 0x4e554d4156494131ull;   // "NUMAVIA1"
    static constexpr uint32_t kDataCapacity = 1u << 14;         // ring symbols, Ethernet bytes
    static constexpr uint32_t kControlCapacity = 1u << 10;

    // `path` empty: private memory (one process, or one MPI rank).
    Arena(const std::string &path, int nodes, int processes, bool ethernet)
        : nodes_(nodes), processes_(processes), ethernet_(ethernet) {
        if (nodes < 1 || processes < 1 || processes > nodes)
            throw std::invalid_argument("a run needs 1 <= processes <= nodes");
        lay_out();
        if (path.empty()) {
            base_ = static_cast<uint8_t *>(
                ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        } else {
            int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
            if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
            // Every process sizes the file the same; the first to get here makes it, zeroed.
            if (::ftruncate(fd, off_t(size_)) < 0) {
                ::close(fd);
                throw std::runtime_error("cannot size " + path + ": " + std::strerror(errno));
            }
            base_ = static_cast<uint8_t *>(::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
            ::close(fd);
        }
        if (base_ == MAP_FAILED)
            throw std::runtime_error(std::string("cannot map the channels: ") + std::strerror(errno));
        // The header is written by whoever comes first; the others check it describes the same run.
        auto *magic = reinterpret_cast<std::atomic<uint64_t> *>(base_);
        auto *shape = reinterpret_cast<std::atomic<uint64_t> *>(base_ + 8);
        const uint64_t want = uint64_t(nodes) << 32 | uint64_t(processes) << 1 | ethernet;
        uint64_t expected = 0;
        if (magic->compare_exchange_strong(expected, kMagic)) shape->store(want);
        else if (expected != kMagic) throw std::runtime_error("the channel file belongs to something else");
        while (shape->load() == 0) {
        }
        if (shape->load() != want) throw std::runtime_error("the channel file belongs to another run");
        for (int c = 0; c < kChannelKinds; c++)
            for (int i = 0; i < nodes_; i++) {
                const Slot &s = slots_[c][i];
                queues_[c][i] =
                    s.capacity ? Queue(reinterpret_cast<QueueState *>(base_ + s.offset),
                                       reinterpret_cast<Record *>(base_ + s.offset + sizeof(QueueState)), s.capacity)
                               : Queue();
            }
    }
    ~Arena() {
        if (base_ && base_ != MAP_FAILED) ::munmap(base_, size_);
    }
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;

    int nodes() const { return nodes_; }
    int processes() const { return processes_; }
    bool ethernet() const { return ethernet_; }

    bool has(Channel c) const { return ethernet_ || (c != Channel::EthUp && c != Channel::EthDown); }
    Queue &queue(Channel c, int node) { return queues_[int(c)][node]; }

    // Contiguous blocks: the same answer in every process and rank.
    int process_of_node(int node) const { return int(int64_t(node) * processes_ / nodes_); }
    static constexpr int process_of_hub() { return 0; }
    std::vector<int> nodes_of(int process) const {
        std::vector<int> v;
        for (int i = 0; i < nodes_; i++)
            if (process_of_node(i) == process) v.push_back(i);
        return v;
    }
    // The process that consumes channel `c` of `node`.
    int consumer(Channel c, int node) const {
        switch (c) {
        case Channel::Ring: return process_of_node((node + 1) % nodes_);
        case Channel::EthDown:
        case Channel::ControlDown: return process_of_node(node);
        default: return process_of_hub();
        }
    }
    int producer(Channel c, int node) const {
        switch (c) {
        case Channel::EthDown:
        case Channel::ControlDown: return process_of_hub();
        default: return process_of_node(node);
        }
    }

    Doorbell &doorbell(int process) { return *reinterpret_cast<Doorbell *>(base_ + doorbells_ + 64 * process); }
    NodeStatus &status(int node) { return *reinterpret_cast<NodeStatus *>(base_ + status_ + 64 * node); }

    // Tell `process` that something it may wait for was published.
    void ring(int process) {
        Doorbell &d = doorbell(process);
        d.seq.fetch_add(1, std::memory_order_release);
        if (d.sleeping.load(std::memory_order_acquire))
            ::syscall(SYS_futex, &d.seq, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    }
    // Sleep until rung or `timeout_ns` passes; `seen` is the doorbell's value when the caller last
    // found nothing to do, so a ring in between is never missed.
    void sleep(int process, uint32_t seen, long timeout_ns) {
        Doorbell &d = doorbell(process);
        d.sleeping.store(1, std::memory_order_seq_cst);
        if (d.seq.load(std::memory_order_seq_cst) == seen) {
            timespec ts{0, timeout_ns};
            ::syscall(SYS_futex, &d.seq, FUTEX_WAIT, seen, &ts, nullptr, 0);
        }
        d.sleeping.store(0, std::memory_order_release);
    }

private:
    static constexpr int kChannelKinds = 5;
    struct Slot {
        size_t offset = 0;
        uint32_t capacity = 0;
    };

    void lay_out() {
        size_t at = 64;   // header: magic, shape
        doorbells_ = at;
        at += 64 * size_t(processes_);
        status_ = at;
        at += 64 * size_t(nodes_);
        for (int c = 0; c < kChannelKinds; c++) {
            slots_[c].assign(nodes_, Slot{});
            queues_[c].assign(nodes_, Queue());
            if (!has(Channel(c))) continue;
            const uint32_t capacity = Channel(c) == Channel::ControlUp || Channel(c) == Channel::ControlDown
                                          ? kControlCapacity
                                          : kDataCapacity;
            for (int i = 0; i < nodes_; i++) {
                slots_[c][i] = {at, capacity};
                at += (Queue::bytes(capacity) + 63) & ~size_t(63);
            }
        }
        size_ = at;
    }

    int nodes_, processes_;
    bool ethernet_;
    size_t size_ = 0, doorbells_ = 0, status_ = 0;
    std::vector<Slot> slots_[kChannelKinds];
    std::vector<Queue> queues_[kChannelKinds];
    uint8_t *base_ = nullptr;
};
