// The channels that cross MPI ranks. Each rank holds a private copy of every queue; for a channel
// whose producer is local and consumer remote, the relay consumes the local queue and sends what
// it finds (records and the new watermark) to the consumer's rank, which pushes them into its copy
// and publishes the watermark. MPI keeps the messages between two ranks in order, so every
// consumer sees exactly the records, in the order, a shared-memory run would.
//
// At the end each rank has sent a known number of messages to each other rank; the ranks swap the
// counts and every rank receives all that were sent to it before it leaves.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <list>
#include <stdexcept>
#include <vector>

#include "arena.hpp"
#include "scheduler.hpp"

class MpiRelay : public Relay {
public:
    MpiRelay(Arena &arena, int rank, int ranks)
        : arena_(arena), rank_(rank), ranks_(ranks), sent_(ranks, 0), received_(ranks, 0) {
        static const Channel kinds[] = {Channel::Ring, Channel::EthUp, Channel::EthDown, Channel::ControlUp,
                                        Channel::ControlDown};
        for (Channel c : kinds) {
            if (!arena.has(c)) continue;
            for (int i = 0; i < arena.nodes(); i++) {
                const int from = arena.producer(c, i), to = arena.consumer(c, i);
                if (from == rank_ && to != rank_) outgoing_.push_back({c, i, to, 0, false});
            }
        }
    }

    bool exchange() override {
        std::vector<std::vector<uint64_t>> batches(ranks_);
        for (Outgoing &o : outgoing_) {
            Queue &q = arena_.queue(o.channel, o.node);
            const uint64_t watermark = q.watermark();   // read first: the records up to it are in
            std::vector<uint64_t> &batch = batches[o.to];
            const size_t header = batch.size();
            batch.insert(batch.end(), {uint64_t(o.channel) << 32 | uint32_t(o.node), watermark, 0});
            uint64_t count = 0;
            while (const Record *r = q.peek()) {
                batch.push_back(r->time);
                batch.push_back(uint64_t(r->a) << 32 | r->b);
                q.pop();
                count++;
            }
            if (!count && watermark == o.sent_watermark && o.sent_once) {
                batch.resize(header);   // nothing new
                continue;
            }
            batch[header + 2] = count;
            o.sent_watermark = watermark;
            o.sent_once = true;
        }
        for (int r = 0; r < ranks_; r++)
            if (!batches[r].empty()) send(r, kData, std::move(batches[r]));
        reap();
        return receive_all();
    }

    void finish() override {
        exchange();
        std::vector<uint64_t> expected(ranks_);
        MPI_Alltoall(sent_.data(), 1, MPI_UINT64_T, expected.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
        for (;;) {
            bool all = true;
            for (int r = 0; r < ranks_; r++) all &= received_[r] >= expected[r];
            if (all) break;
            receive_one(true);
        }
        while (!in_flight_.empty()) reap(true);
    }

    void share_status(Arena &arena) override {
        if (rank_ == 0) return;
        std::vector<uint64_t> status;
        for (int i : arena.nodes_of(rank_)) {
            status.push_back(uint64_t(i));
            status.push_back(arena.status(i).sys_cycle.load());
        }
        send(0, kStatus, std::move(status));
    }

private:
    enum Tag { kData = 1, kStatus = 2 };
    struct Outgoing {
        Channel channel;
        int node, to;
        uint64_t sent_watermark;
        bool sent_once;
    };
    struct InFlight {
        MPI_Request request;
        std::vector<uint64_t> data;
    };

    void send(int to, int tag, std::vector<uint64_t> data) {
        in_flight_.push_back({MPI_REQUEST_NULL, std::move(data)});
        InFlight &m = in_flight_.back();
        MPI_Isend(m.data.data(), int(m.data.size()), MPI_UINT64_T, to, tag, MPI_COMM_WORLD, &m.request);
        sent_[to]++;
    }

    // Free the buffers of messages MPI has sent.
    void reap(bool block = false) {
        for (auto it = in_flight_.begin(); it != in_flight_.end();) {
            int done = 0;
            if (block) {
                MPI_Wait(&it->request, MPI_STATUS_IGNORE);
                done = 1;
            } else {
                MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
            }
            it = done ? in_flight_.erase(it) : std::next(it);
            if (block) break;
        }
    }

    bool receive_all() {
        bool any = false;
        while (receive_one(false)) any = true;
        return any;
    }

    bool receive_one(bool block) {
        MPI_Status status;
        int flag = 0;
        if (block) {
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
            flag = 1;
        } else {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
        }
        if (!flag) return false;
        int count = 0;
        MPI_Get_count(&status, MPI_UINT64_T, &count);
        std::vector<uint64_t> data(static_cast<size_t>(count));
        MPI_Recv(data.data(), count, MPI_UINT64_T, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        received_[status.MPI_SOURCE]++;
        if (status.MPI_TAG == kStatus) {
            for (size_t k = 0; k + 1 < data.size(); k += 2) arena_.status(int(data[k])).sys_cycle.store(data[k + 1]);
            return true;
        }
        for (size_t k = 0; k < data.size();) {
            const Channel c = Channel(data[k] >> 32);
            const int node = int(uint32_t(data[k]));
            const uint64_t watermark = data[k + 1], n = data[k + 2];
            k += 3;
            Queue &q = arena_.queue(c, node);
            for (uint64_t j = 0; j < n; j++, k += 2)
                if (!q.push(data[k], uint32_t(data[k + 1] >> 32), uint32_t(data[k + 1])))
                    throw std::runtime_error("a channel from another rank overflowed");
            q.publish(watermark);
        }
        return true;
    }

    Arena &arena_;
    int rank_, ranks_;
    std::vector<Outgoing> outgoing_;
    std::list<InFlight> in_flight_;
    std::vector<uint64_t> sent_, received_;
};
