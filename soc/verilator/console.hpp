// Per-node UART console: assembles lines, prints them with a node prefix, saves them to a log
// file and notes the cycle at which a marker line first appears. With a ConsoleInput it also
// feeds the node's UART receiver (a shell on the node), and what the node prints goes back to
// the input's client.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "peripheral.hpp"
#include "tcp_listener.hpp"

// Bytes for a node's UART receiver, from a TCP client on 127.0.0.1:port (one at a time; what the
// node prints is sent to it, so the client is a terminal on the node: `numavia console NODE`)
// and/or from a file descriptor such as the harness's standard input (a terminal on one node).
// Self-contained: the harness calls poll() every few hundred cycles for the I/O, and the console
// takes bytes with has_byte()/front()/pop() as the receiver accepts them.
class ConsoleInput {
public:
    // port 0: no socket; input_fd -1: no descriptor. Exits with a message if it cannot listen.
    ConsoleInput(int node, int port, int input_fd = -1) : node_(node), port_(port), input_fd_(input_fd) {
        if (port_ == 0) return;
        listen_fd_ = listen_on_loopback(node_, port_, "console ");
    }
    ~ConsoleInput() {
        if (client_fd_ >= 0) ::close(client_fd_);
        if (listen_fd_ >= 0) ::close(listen_fd_);
    }
    ConsoleInput(const ConsoleInput &) = delete;
    ConsoleInput &operator=(const ConsoleInput &) = delete;

    bool has_byte() const { return !pending_.empty(); }
    uint8_t front() const { return pending_.front(); }
    void pop() { pending_.pop_front(); }
    bool connected() const { return client_fd_ >= 0; }

    // A byte the node printed: for the client, if one is connected (sent at the next poll()).
    void output(uint8_t byte) {
        if (client_fd_ >= 0) to_client_.push_back(char(byte));
    }

    // Non-blocking I/O: accept a client, read what it and the descriptor send, send it the output.
    void poll() {
        if (listen_fd_ >= 0 && client_fd_ < 0) accept_client();
        if (client_fd_ >= 0 && !read_from(client_fd_)) drop_client();
        if (input_fd_ >= 0 && !read_from(input_fd_)) input_fd_ = -1;   // end of input: stop reading
        while (client_fd_ >= 0 && !to_client_.empty()) {
            ssize_t n = ::send(client_fd_, to_client_.data(), to_client_.size(), MSG_NOSIGNAL);
            if (n > 0) {
                to_client_.erase(0, size_t(n));
            } else {
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
                drop_client();
            }
        }
    }

private:
    void accept_client() {
        const int fd = accept_client_of(listen_fd_);
        if (fd < 0) return;
        client_fd_ = fd;
    }
    void drop_client() {
        ::close(client_fd_);
        client_fd_ = -1;
        to_client_.clear();
    }
    // Everything `fd` has now into the pending bytes; false at its end or on an error.
    bool read_from(int fd) {
        // Asked with poll() rather than made non-blocking: the descriptor may be a terminal the
        // launcher and the shell share, whose flags must stay as they were.
        char buf[256];
        pollfd p{fd, POLLIN, 0};
        while (::poll(&p, 1, 0) > 0) {
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) {
                pending_.insert(pending_.end(), buf, buf + n);
                continue;
            }
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
        }
        return true;
    }

    int node_, port_;
    int input_fd_;
    int listen_fd_ = -1, client_fd_ = -1;
    std::deque<uint8_t> pending_;
    std::string to_client_;
};

template <typename Pads>
class Console : public Peripheral {
public:
    Console(Pads &pads, int node, const std::string &log_path, const std::string &marker, bool echo,
            ConsoleInput *input = nullptr)
        : pads_(pads), node_(node), marker_(marker), echo_(echo), input_(input) {
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
        *pads_.serial_sink_valid = input_ && input_->has_byte();
        *pads_.serial_sink_data = *pads_.serial_sink_valid ? input_->front() : 0;
    }
    void sample(uint64_t cycle) override {
        if (*pads_.serial_source_valid) put(*pads_.serial_source_data, cycle);
        if (*pads_.serial_sink_valid && *pads_.serial_sink_ready) input_->pop();
    }
    void poll() override {
        if (input_) input_->poll();
    }

    void put(uint8_t byte, uint64_t cycle) {
        if (input_) input_->output(byte);
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
        if (!marker_.empty() && !marker_seen() && line_.find(marker_) != std::string::npos) marker_cycle_ = cycle;
        line_.clear();
    }
    void flush_partial() {
        if (!line_.empty()) emit(UINT64_MAX - 1);
    }

    Pads &pads_;
    int node_;
    std::string marker_;
    bool echo_;
    ConsoleInput *input_;
    std::FILE *log_ = nullptr;
    std::string line_;
    uint64_t marker_cycle_ = UINT64_MAX;
};
