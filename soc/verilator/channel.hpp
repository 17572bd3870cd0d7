// A channel between two simulated entities (nodes, the hub): a lock-free single-producer
// single-consumer queue of time-stamped records, plus the producer's watermark.
//
// Time is in picoseconds. A record carries the time of the clock edge at which the producer made
// it; the consumer sees it `latency` picoseconds later (a link's delay). The watermark says that
// every record the producer will ever make with a time up to it is already in the queue, so the
// consumer may simulate up to watermark + latency and no further: the lookahead of conservative
// synchronisation. Only events travel (a ring symbol that is not idle, an Ethernet byte with its
// valid bit): an idle link costs nothing but its watermark.
//
// The queue lives in memory that both ends can reach: a process's own memory, a shared-memory
// arena of several processes (arena.hpp), or a local copy fed by MPI (mpi_transport.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

constexpr uint64_t kForever = std::numeric_limits<uint64_t>::max();

inline uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kForever - b ? kForever : a + b; }

struct Record {
    uint64_t time;   // ps of the producer's clock edge
    uint32_t a, b;   // payload: its meaning is the channel's (a symbol, a byte, a control message)
};

// The queue's shared state. Producer and consumer fields sit on separate cache lines.
struct alignas(64) QueueState {
    std::atomic<uint64_t> head;   // records written (producer)
    char pad0[56];
    std::atomic<uint64_t> watermark;   // producer: every record up to this time is written
    char pad1[56];
    std::atomic<uint64_t> tail;   // records consumed (consumer)
    char pad2[56];
};

class Queue {
public:
    Queue() = default;
    Queue(QueueState *state, Record *records, uint32_t capacity) : s_(state), r_(records), capacity_(capacity) {}
    static size_t bytes(uint32_t capacity) { return sizeof(QueueState) + capacity * sizeof(Record); }

    // --- producer ---
    bool full() const { return head_ - s_->tail.load(std::memory_order_acquire) >= capacity_; }
    // False when the queue is full (the consumer lags by more than the queue holds).
    bool push(uint64_t time, uint32_t a, uint32_t b = 0) {
        if (full()) return false;
        r_[head_ % capacity_] = {time, a, b};
        head_++;
        return true;
    }
    // Make the records pushed so far visible, and promise nothing more up to `watermark`.
    void publish(uint64_t watermark) {
        s_->head.store(head_, std::memory_order_release);
        s_->watermark.store(watermark, std::memory_order_release);
    }

    // --- consumer ---
    uint64_t watermark() const { return s_->watermark.load(std::memory_order_acquire); }
    // The next record, if one is visible.
    const Record *peek() {
        if (tail_ == seen_head_) {
            seen_head_ = s_->head.load(std::memory_order_acquire);
            if (tail_ == seen_head_) return nullptr;
        }
        return &r_[tail_ % capacity_];
    }
    void pop() { s_->tail.store(++tail_, std::memory_order_release); }

    QueueState *state() const { return s_; }
    Record *records() const { return r_; }
    uint32_t capacity() const { return capacity_; }

private:
    QueueState *s_ = nullptr;
    Record *r_ = nullptr;
    uint32_t capacity_ = 0;
    uint64_t head_ = 0;        // producer's own count
    uint64_t tail_ = 0;        // consumer's own count
    uint64_t seen_head_ = 0;   // consumer's last look at the producer's count
};

// The consumer's end of a channel: the queue and the link's latency.
struct Inlet {
    Queue *queue = nullptr;
    uint64_t latency_ps = 0;
    // True once every record that can reach the consumer by `time` is in the queue.
    bool complete_until(uint64_t time) const { return saturating_add(queue->watermark(), latency_ps) >= time; }
    // The next record due at the consumer by `time` (its time + latency <= time), if any.
    const Record *due(uint64_t time) const {
        const Record *r = queue->peek();
        return r && saturating_add(r->time, latency_ps) <= time ? r : nullptr;
    }
    void pop() const { queue->pop(); }
};

// A queue in this process's own memory, for channels that never leave it (and unit tests).
struct LocalQueue {
    explicit LocalQueue(uint32_t capacity) : records(capacity), queue(&state, records.data(), capacity) {}
    LocalQueue(const LocalQueue &) = delete;
    LocalQueue &operator=(const LocalQueue &) = delete;
    QueueState state{};
    std::vector<Record> records;
    Queue queue;
};
