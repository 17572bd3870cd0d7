// The TCP listener of a node's host bridge or console: 127.0.0.1, non-blocking, one client.
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
#include <cstdlib>
#include <cstring>

// The listening socket on `port`; if it cannot be had (a port in use), the simulator stops with
// one line naming the node and `what` listens ("" for the host bridge, "console " for the console).
inline int listen_on_loopback(int node, int port, const char *what) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0 || ::listen(fd, 1) < 0) {
        std::fprintf(stderr, "sim: node %d: %scannot listen on 127.0.0.1:%d (%s)\n", node, what, port,
                     std::strerror(errno));
        std::exit(1);
    }
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

// A client waiting on `listen_fd`, non-blocking and without Nagle's delay (every reply is one
// small packet a host waits for); -1 if none waits.
inline int accept_client_of(int listen_fd) {
    const int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) return -1;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}
