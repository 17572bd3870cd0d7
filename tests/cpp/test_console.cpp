// Unit test of the harness's node console (console.hpp) with plain variables for the UART pads:
// input from a TCP client and from a file descriptor reaches the receiver only when it is ready,
// in order; what the node prints reaches the client; without input the receiver sees nothing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "verilated.h"
#include "console.hpp"

static int failures = 0;
#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            failures++;                                                                                                \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                               \
        }                                                                                                              \
    } while (0)

struct Pads {
    CData source_valid = 0, source_ready = 0, source_data = 0, sink_valid = 0, sink_ready = 0, sink_data = 0;
    CData *serial_source_valid = &source_valid, *serial_source_ready = &source_ready,
          *serial_source_data = &source_data, *serial_sink_valid = &sink_valid, *serial_sink_ready = &sink_ready,
          *serial_sink_data = &sink_data;
};

static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

static int connect_to(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 ? fd : -1;
}

// Runs `cycles` cycles with the receiver ready on every `ready_every`-th; returns what it accepted.
static std::string receive(Console<Pads> &console, Pads &pads, int cycles, int ready_every) {
    std::string got;
    for (int c = 0; c < cycles; c++) {
        console.drive(c);
        pads.sink_ready = c % ready_every == 0;
        if (pads.sink_valid && pads.sink_ready) got.push_back(char(pads.sink_data));
        console.sample(c);
    }
    return got;
}

static void test_socket_input_and_output() {
    Pads pads;
    int port = free_port();
    ConsoleInput input(0, port);
    Console<Pads> console(pads, 0, "node0.log", "", false, &input);
    int client = connect_to(port);
    CHECK(client >= 0);
    for (int i = 0; i < 100 && !input.connected(); i++) {
        console.poll();
        ::usleep(1000);
    }
    CHECK(input.connected());
    const std::string typed = "numavia status\r\n";
    CHECK(::send(client, typed.data(), typed.size(), 0) == ssize_t(typed.size()));
    for (int i = 0; i < 100 && !input.has_byte(); i++) {
        console.poll();
        ::usleep(1000);
    }
    console.poll();
    // Each byte is held until the receiver takes it, none is taken twice or skipped.
    CHECK(receive(console, pads, 3 * int(typed.size()), 3) == typed);
    CHECK(!input.has_byte());
    CHECK(receive(console, pads, 10, 1).empty());

    // What the node prints, CR included, goes to the client as it is.
    const std::string printed = "uart:~$ ok\r\n";
    for (size_t i = 0; i < printed.size(); i++) {
        pads.source_valid = 1;
        pads.source_data = CData(printed[i]);
        console.sample(i);
    }
    pads.source_valid = 0;
    console.poll();
    std::string echoed;
    char buf[64];
    for (int i = 0; i < 100 && echoed.size() < printed.size(); i++) {
        ssize_t n = ::recv(client, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) echoed.append(buf, size_t(n));
        else ::usleep(1000);
    }
    CHECK(echoed == printed);

    // A client that goes away is dropped; a new one is accepted.
    ::close(client);
    for (int i = 0; i < 100 && input.connected(); i++) {
        console.poll();
        ::usleep(1000);
    }
    CHECK(!input.connected());
    client = connect_to(port);
    for (int i = 0; i < 100 && !input.connected(); i++) {
        console.poll();
        ::usleep(1000);
    }
    CHECK(input.connected());
    ::close(client);
}

static void test_descriptor_input_until_its_end() {
    Pads pads;
    int pipe_fds[2];
    CHECK(::pipe(pipe_fds) == 0);
    ConsoleInput input(1, 0, pipe_fds[0]);
    Console<Pads> console(pads, 1, "node1.log", "", false, &input);
    CHECK(::write(pipe_fds[1], "help\n", 5) == 5);
    ::close(pipe_fds[1]);
    console.poll();
    console.poll();   // the end of input: no more reads, no error
    CHECK(receive(console, pads, 10, 1) == "help\n");
    ::close(pipe_fds[0]);
}

static void test_without_input_the_receiver_sees_nothing() {
    Pads pads;
    Console<Pads> console(pads, 2, "node2.log", "", false);
    console.poll();
    CHECK(receive(console, pads, 10, 1).empty());
    CHECK(pads.source_ready == 1);
}

int main() {
    test_socket_input_and_output();
    test_descriptor_input_until_its_end();
    test_without_input_the_receiver_sees_nothing();
    std::printf("%d failures\n", failures);
    return failures != 0;
}
