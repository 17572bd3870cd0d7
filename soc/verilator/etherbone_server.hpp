// Host bridge server: Etherbone records over TCP, as LiteX's litex_server speaks them, so LiteX's
// RemoteClient (and numavia's own client) reach a simulated node the way they reach a board.
//
// Extensions, invisible to RemoteClient: a read reply carries bit 3 of the record's first byte
// set when any access of the record got a bus error; a probe packet (pf) is answered with a probe
// reply (pr) whose padding holds the node's bus-error count, so writes can be checked too.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "peripheral.hpp"
#include "tcp_listener.hpp"
#include "wishbone_master.hpp"

namespace etherbone {
constexpr uint16_t kMagic = 0x4e6f;
constexpr size_t kPacketHeader = 8;
constexpr size_t kRecordHeader = 4;
constexpr uint8_t kFlagProbe = 0x01, kFlagProbeReply = 0x02;
constexpr uint8_t kRecordError = 0x08;

inline uint32_t be32(const uint8_t *p) { return uint32_t(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
inline void put_be32(std::vector<uint8_t> &v, uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
}
}   // namespace etherbone

template <typename Pads>
class EtherboneServer : public Peripheral {
public:
    EtherboneServer(Pads &pads, int node, int port)
        : master_(WishbonePins{pads.hostbridge_cyc, pads.hostbridge_stb, pads.hostbridge_we, pads.hostbridge_sel,
                               pads.hostbridge_ack, pads.hostbridge_err, pads.hostbridge_adr, pads.hostbridge_dat_w,
                               pads.hostbridge_dat_r}),
          node_(node), port_(port) {
        listen_fd_ = listen_on_loopback(node, port, "");
    }
    ~EtherboneServer() {
        if (client_fd_ >= 0) ::close(client_fd_);
        ::close(listen_fd_);
    }

    void drive(uint64_t) override { master_.drive(); }
    void sample(uint64_t) override { master_.sample(); }
    bool ever_connected() const { return ever_connected_; }
    bool connected() const { return client_fd_ >= 0; }
    uint64_t bus_errors() const { return bus_errors_; }
    uint64_t accesses() const { return accesses_; }

    // Called every few hundred cycles: accept, read requests, send finished replies.
    void poll() override {
        if (client_fd_ < 0) accept_client();
        if (client_fd_ < 0) return;
        collect_results();
        if (outstanding_ == 0) receive();
    }

private:
    void accept_client() {
        const int fd = accept_client_of(listen_fd_);
        if (fd < 0) return;
        client_fd_ = fd;
        ever_connected_ = true;
        rx_.clear();
        std::string info = "CommSim:127.0.0.1:" + std::to_string(port_);
        send_all(reinterpret_cast<const uint8_t *>(info.data()), info.size());
    }

    void drop_client() {
        ::close(client_fd_);
        client_fd_ = -1;
        rx_.clear();
    }

    void receive() {
        uint8_t buf[4096];
        for (;;) {
            ssize_t n = ::recv(client_fd_, buf, sizeof buf, 0);
            if (n > 0) {
                rx_.insert(rx_.end(), buf, buf + n);
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                drop_client();
                return;
            }
            break;
        }
        parse();
    }

    // Take one complete packet off the receive buffer and start its accesses.
    void parse() {
        using namespace etherbone;
        if (rx_.size() < kPacketHeader) return;
        if ((uint16_t(rx_[0]) << 8 | rx_[1]) != kMagic) {
            std::fprintf(stderr, "sim: node %d: host bridge: bad Etherbone magic, closing\n", node_);
            drop_client();
            return;
        }
        const uint8_t flags = rx_[2];
        const size_t addr_size = rx_[3] >> 4;
        if (flags & kFlagProbe) {
            std::vector<uint8_t> reply = {rx_[0], rx_[1], uint8_t((flags & 0xf0) | kFlagProbeReply), rx_[3]};
            put_be32(reply, uint32_t(bus_errors_));
            send_all(reply.data(), reply.size());
            rx_.erase(rx_.begin(), rx_.begin() + kPacketHeader);
            return;
        }
        if (addr_size != 4) {
            std::fprintf(stderr, "sim: node %d: host bridge: %zu-byte addresses unsupported, closing\n", node_,
                         addr_size);
            drop_client();
            return;
        }
        if (rx_.size() < kPacketHeader + kRecordHeader) return;
        const uint8_t *rec = rx_.data() + kPacketHeader;
        const size_t wcount = rec[2], rcount = rec[3];
        size_t size = kPacketHeader + kRecordHeader;
        if (wcount) size += 4 + 4 * wcount;
        if (rcount) size += 4 + 4 * rcount;
        if (rx_.size() < size) return;

        const uint8_t *p = rec + kRecordHeader;
        if (wcount) {
            uint32_t base = be32(p);
            p += 4;
            for (size_t i = 0; i < wcount; i++, p += 4) start({true, base + 4 * uint32_t(i), be32(p)});
        }
        if (rcount) {
            reply_base_ = be32(p);
            p += 4;
            for (size_t i = 0; i < rcount; i++, p += 4) start({false, be32(p), 0});
        }
        reply_reads_ = rcount;
        reply_header_.assign(rx_.begin(), rx_.begin() + kPacketHeader);
        rx_.erase(rx_.begin(), rx_.begin() + size);
    }

    void start(const BusOp &op) {
        master_.submit(op);
        outstanding_++;
    }

    void collect_results() {
        while (master_.has_done()) {
            BusOp op = master_.pop_done();
            outstanding_--;
            accesses_++;
            if (op.error) {
                bus_errors_++;
                record_error_ = true;
            }
            if (!op.write) read_data_.push_back(op.data);
        }
        if (outstanding_ == 0 && reply_header_.size()) finish_packet();
    }

    void finish_packet() {
        using namespace etherbone;
        if (reply_reads_) {
            std::vector<uint8_t> reply(reply_header_);
            reply.push_back(record_error_ ? kRecordError : 0);
            reply.push_back(0x0f);
            reply.push_back(uint8_t(read_data_.size()));
            reply.push_back(0);
            put_be32(reply, reply_base_);
            for (uint32_t d : read_data_) put_be32(reply, d);
            send_all(reply.data(), reply.size());
        }
        reply_header_.clear();
        read_data_.clear();
        record_error_ = false;
        reply_reads_ = 0;
    }

    void send_all(const uint8_t *data, size_t size) {
        while (size && client_fd_ >= 0) {
            ssize_t n = ::send(client_fd_, data, size, MSG_NOSIGNAL);
            if (n > 0) {
                data += n;
                size -= size_t(n);
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                usleep(100);
            } else {
                drop_client();
            }
        }
    }

    WishboneMaster master_;
    int node_, port_;
    int listen_fd_ = -1, client_fd_ = -1;
    bool ever_connected_ = false;
    std::vector<uint8_t> rx_, reply_header_;
    std::vector<uint32_t> read_data_;
    uint32_t reply_base_ = 0;
    size_t reply_reads_ = 0, outstanding_ = 0;
    bool record_error_ = false;
    uint64_t bus_errors_ = 0, accesses_ = 0;
};
