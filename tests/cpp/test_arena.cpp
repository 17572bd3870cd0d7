// Unit test of the channels between processes (arena.hpp, channel.hpp): a producer in one process
// and a consumer in another, over one shared-memory file, with the doorbell waking the consumer:
// every record arrives once and in order, every record up to a watermark is there once the
// watermark is seen; a file made for another ring shape is refused.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "arena.hpp"

static int failures = 0;
#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            failures++;                                                                                                \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                               \
        }                                                                                                              \
    } while (0)

static constexpr uint64_t kRecords = 200000;
static constexpr uint64_t kStep = 10000;   // ps between records

// Process 1 (node 1): consume node 0's ring channel until its producer stops.
static int consume(const std::string &path) {
    Arena arena(path, 2, 2, false);
    Queue &q = arena.queue(Channel::Ring, 0);
    uint64_t expected = 0;
    for (;;) {
        const uint32_t seen = arena.doorbell(1).seq.load();
        const uint64_t watermark = q.watermark();
        while (const Record *r = q.peek()) {
            if (r->time != (expected + 1) * kStep || r->a != uint32_t(expected) || r->b != uint32_t(~expected))
                return 10;
            q.pop();
            expected++;
        }
        // Every record up to the watermark read before draining was there to drain.
        if (watermark != kForever && expected < watermark / kStep) return 11;
        if (watermark == kForever) break;
        arena.sleep(1, seen, 100'000'000);
    }
    return expected == kRecords ? 0 : 12;
}

int main() {
    const std::string path = "test_arena.ring";
    std::remove(path.c_str());
    {
        Arena arena(path, 2, 2, false);
        CHECK(arena.process_of_node(0) == 0 && arena.process_of_node(1) == 1);
        CHECK(arena.consumer(Channel::Ring, 0) == 1 && arena.consumer(Channel::Ring, 1) == 0);
        CHECK(arena.consumer(Channel::ControlUp, 1) == Arena::process_of_hub());
        CHECK(!arena.has(Channel::EthUp) && arena.has(Channel::ControlDown));
    }
    const pid_t child = fork();
    if (child == 0) _exit(consume(path));
    {
        Arena arena(path, 2, 2, false);
        Queue &q = arena.queue(Channel::Ring, 0);
        for (uint64_t i = 0; i < kRecords; i++) {
            while (!q.push((i + 1) * kStep, uint32_t(i), uint32_t(~i))) {
                q.publish(i * kStep);   // full: let the consumer catch up
                arena.ring(1);
            }
            if (i % 777 == 0) {
                q.publish((i + 1) * kStep);
                arena.ring(1);
            }
        }
        q.publish(kForever);
        arena.ring(1);
        int status = 0;
        waitpid(child, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            std::fprintf(stderr, "consumer status %d\n", WEXITSTATUS(status));
    }
    bool refused = false;
    try {
        Arena other(path, 3, 2, false);
    } catch (const std::runtime_error &e) {
        refused = std::string(e.what()).find("another run") != std::string::npos;
    }
    CHECK(refused);
    std::remove(path.c_str());

    // A private arena (one process, or one MPI rank) lays the same channels out.
    Arena local("", 4, 1, true);
    CHECK(local.has(Channel::EthUp) && local.nodes_of(0).size() == 4);

    std::printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
