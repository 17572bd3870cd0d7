// Numavia cluster simulation: N nodes of the SoC in one deterministic Verilator model.
//
// The harness owns everything outside the nodes: clocks and reset, each node's UART console (and
// its input, from a socket per node or this process's standard input), each node's host bridge
// (Etherbone over TCP). It stops when every node printed the stop marker,
// at a cycle limit, on SIGINT/SIGTERM, or (with --serve) when the last host disconnects, and
// says which in a final line and in run.json.

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sys/prctl.h>

#include "verilated.h"
#include "Vnumavia_cluster.h"

#include "cluster_ports.h"  // generated: NV_NODES, NodePorts, nv_bind_ports(), nv_clocks()
#include "clocks.hpp"
#include "console.hpp"
#include "etherbone_server.hpp"
#include "ring_link.hpp"
#include "trace_player.hpp"
#include "gmii_link.hpp"

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
void on_signal(int sig) { g_stop_signal = sig; }

struct Options {
    uint64_t max_cycles = 0;          // 0: no limit
    std::string stop_marker;          // stop when every node printed a line containing this
    std::string out_dir = ".";
    int bridge_port = 0;              // 0: no host bridge; node i listens on bridge_port + i
    int console_port = 0;             // 0: no console input socket; node i listens on console_port + i
    int console_stdin = -1;           // the node whose UART receives this process's standard input
    bool serve = false;               // keep running after the marker, until a signal
    bool until_disconnect = false;    // ... or until the last host that connected disconnects
    bool quiet = false;
    uint64_t progress_every = 0;      // cycles between progress lines on stderr (0: none)
    double wall_limit = 0;            // seconds of wall time before giving up (0: none)
    std::string trace_dir;            // replay node<i>.trace on each node's host port once all are ready
    std::string access_log;           // with --trace-dir: every replayed access (node addr w value issue done err)
    bool numa = false;                // set every node's NUMA switch (regmap.CTRL.MODE_STRAP)
    unsigned ring_delay = 4;          // cycles per ring hop (link + cable)
    double ring_flip_rate = 0;        // probability of a bit flip per ring symbol
    uint64_t seed = 1;
    GmiiLinkOptions eth;              // --eth-*: the Ethernet switch between the nodes
};

[[noreturn]] void usage(const char *msg) {
    std::fprintf(stderr,
        "sim: %s\n"
        "usage: Vnumavia_cluster [--max-cycles N] [--stop-marker TEXT] [--out-dir DIR]\n"
        "                        [--bridge-port PORT] [--serve] [--quiet] [--progress N]\n"
        "                        [--wall-limit SECONDS] [--ring-delay N] [--ring-flip-rate F]\n"
        "                        [--seed N] [--trace-dir DIR] [--access-log FILE] [--numa]\n"
        "                        [--until-disconnect] [--eth-delay CYCLES] [--eth-loss P]\n"
        "                        [--eth-corrupt P] [--eth-duplicate P] [--eth-reorder P]\n"
        "                        [--eth-seed N] [--console-port PORT] [--console-stdin NODE]\n", msg);
    std::exit(2);
}

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        if (a == "--max-cycles") o.max_cycles = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--stop-marker") o.stop_marker = value();
        else if (a == "--out-dir") o.out_dir = value();
        else if (a == "--bridge-port") o.bridge_port = std::atoi(value().c_str());
        else if (a == "--console-port") o.console_port = std::atoi(value().c_str());
        else if (a == "--console-stdin") o.console_stdin = std::atoi(value().c_str());
        else if (a == "--serve") o.serve = true;
        else if (a == "--until-disconnect") o.until_disconnect = true;
        else if (a == "--quiet") o.quiet = true;
        else if (a == "--progress") o.progress_every = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--wall-limit") o.wall_limit = std::atof(value().c_str());
        else if (a == "--ring-delay") o.ring_delay = std::atoi(value().c_str());
        else if (a == "--ring-flip-rate") o.ring_flip_rate = std::atof(value().c_str());
        else if (a == "--seed") o.seed = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--trace-dir") o.trace_dir = value();
        else if (a == "--access-log") o.access_log = value();
        else if (a == "--numa") o.numa = true;
        else if (GmiiLinkOptions::accepts(a)) {
            std::string error;
            if (!o.eth.set(a, value(), error)) usage(error.c_str());
        }
        else if (a.rfind("+verilator+", 0) == 0) continue;
        else usage(("unknown argument " + a).c_str());
    }
    if (o.serve && !o.bridge_port) usage("--serve needs --bridge-port");
    if (o.until_disconnect && !o.serve) usage("--until-disconnect goes with --serve");
    if (o.console_stdin >= NV_NODES) usage("--console-stdin names a node the ring does not have");
    return o;
}

}  // namespace

int main(int argc, char **argv) {
    Options opt = parse(argc, argv);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the `numavia` process that started us
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    auto context = std::make_unique<VerilatedContext>();
    context->commandArgs(argc, argv);
    auto top = std::make_unique<Vnumavia_cluster>(context.get(), "cluster");
    NodePorts nodes[NV_NODES];
    nv_bind_ports(top.get(), nodes);

    std::vector<ClockDomain> domains;
    for (const ClockSpec &spec : nv_clocks(top.get())) domains.emplace_back(spec);
    ClockDomain &sys = domains[0];   // the first clock is sys: cycle counts and limits use it

    std::vector<std::unique_ptr<ConsoleInput>> console_inputs;
    std::vector<std::unique_ptr<Console<NodePorts>>> consoles;
    std::vector<std::unique_ptr<EtherboneServer<NodePorts>>> bridges;
    for (int i = 0; i < NV_NODES; i++) {
        const bool with_stdin = i == opt.console_stdin;
        console_inputs.emplace_back(opt.console_port || with_stdin
            ? new ConsoleInput(i, opt.console_port ? opt.console_port + i : 0, with_stdin ? 0 : -1) : nullptr);
        consoles.emplace_back(new Console<NodePorts>(nodes[i], i,
            opt.out_dir + "/node" + std::to_string(i) + ".log", opt.stop_marker, !opt.quiet,
            console_inputs.back().get()));
        sys.add(consoles.back().get());
        if (opt.bridge_port) {
            bridges.emplace_back(new EtherboneServer<NodePorts>(nodes[i], i, opt.bridge_port + i));
            sys.add(bridges.back().get());
        }
    }
    // Trace replay on the card's second host port (what PCIe would drive on a board).
    Barriers barriers(NV_NODES);
    std::vector<std::unique_ptr<TraceSource>> traces;
    std::vector<std::unique_ptr<HostDriver>> players;
    for (int i = 0; i < NV_NODES; i++) *nodes[i].mode_strap = opt.numa ? 1 : 0;
    std::FILE *access_log = nullptr;
    if (!opt.access_log.empty() && !(access_log = std::fopen(opt.access_log.c_str(), "w")))
        usage(("cannot write " + opt.access_log).c_str());
    if (!opt.trace_dir.empty()) {
        for (int i = 0; i < NV_NODES; i++) {
            traces.emplace_back(new TraceSource(opt.trace_dir + "/node" + std::to_string(i) + ".trace", i, barriers));
            TraceSource *source = traces.back().get();
            players.emplace_back(new HostDriver(i, HostPins{nodes[i].hostport_req_valid, nodes[i].hostport_req_ready,
                                                            nodes[i].hostport_wdata_valid, nodes[i].hostport_wdata_ready,
                                                            nodes[i].hostport_resp_valid, nodes[i].hostport_resp_ready,
                                                            nodes[i].hostport_req_payload, nodes[i].hostport_wdata_payload,
                                                            nodes[i].hostport_resp_payload},
                                                 [source](HostOp &op, uint64_t cycle) { return (*source)(op, cycle); },
                                                 access_log));
            sys.add(players.back().get());
        }
    }
    uint64_t trace_start = 0;

    std::vector<RingPins> ring_pins;
    for (int i = 0; i < NV_NODES; i++) ring_pins.push_back({nodes[i].ring_tx, nodes[i].ring_rx});
    RingFaults ring_faults;
    ring_faults.flip_rate = opt.ring_flip_rate;
    Ring ring(ring_pins, opt.ring_delay, ring_faults, opt.seed);
    sys.add(&ring);
    GmiiSwitch<NodePorts> eth_link(nodes, NV_NODES, opt.eth, opt.out_dir + "/eth_link.json");
    for (auto &d : domains)
        if (std::string(d.spec().name) == "eth") d.add(&eth_link);
    if (opt.bridge_port)
        std::fprintf(stderr, "sim: host bridges on 127.0.0.1:%d..%d\n", opt.bridge_port,
                     opt.bridge_port + NV_NODES - 1);
    if (opt.console_port)
        std::fprintf(stderr, "sim: node consoles on 127.0.0.1:%d..%d\n", opt.console_port,
                     opt.console_port + NV_NODES - 1);

    const auto wall_start = std::chrono::steady_clock::now();
    std::string reason;
    int exit_code = 0;
    const uint64_t reset_cycles = 16;
    uint64_t last_check = 0;

    top->sys_rst = 1;
    top->eval();

    for (;;) {
        // Advance to the next clock edge(s); all clocks start low at time 0.
        uint64_t now = UINT64_MAX;
        for (auto &d : domains) now = std::min(now, d.next_toggle_ps());
        bool any_rising = false;
        for (auto &d : domains) {
            if (d.next_toggle_ps() != now) continue;
            if (d.rising_next()) any_rising = true;
            else d.fall();
        }
        if (!any_rising) continue;
        top->sys_rst = sys.cycle() < reset_cycles;
        for (auto &d : domains)
            if (d.next_toggle_ps() == now && d.rising_next()) d.drive();
        top->eval();
        for (auto &d : domains)
            if (d.next_toggle_ps() == now && d.rising_next()) d.sample();
        for (auto &d : domains)
            if (d.next_toggle_ps() == now && d.rising_next()) d.rise();
        top->eval();

        const uint64_t cycle = sys.cycle();
        if (cycle - last_check < 256) continue;
        last_check = cycle;
        if (g_stop_signal) {
            reason = g_stop_signal == SIGINT ? "interrupted" : "terminated";
            exit_code = 130;
            break;
        }
        for (auto &b : bridges) b->poll();
        for (auto &c : consoles) c->poll();
        bool all_ready = !opt.stop_marker.empty();
        for (auto &c : consoles) all_ready &= c->marker_seen();
        if (!players.empty()) {
            if (all_ready && !trace_start) {
                trace_start = cycle;
                for (auto &p : players) p->enable();
            }
            bool traces_done = trace_start != 0;
            for (auto &p : players) traces_done &= p->done();
            if (traces_done && !opt.serve) {
                reason = "every trace is done";
                break;
            }
        } else if (all_ready && !opt.serve) {
            reason = "every node is ready";
            break;
        }
        if (opt.serve && opt.until_disconnect) {
            bool any_connected = false, any_ever = false;
            for (auto &b : bridges) {
                any_connected |= b->connected();
                any_ever |= b->ever_connected();
            }
            if (any_ever && !any_connected) {
                reason = "the host disconnected";
                break;
            }
        }
        if (opt.max_cycles && cycle >= opt.max_cycles) {
            reason = "cycle limit reached";
            exit_code = all_ready ? 0 : 3;
            break;
        }
        if (opt.wall_limit > 0 && (cycle & 0xffff) < 256 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count() > opt.wall_limit) {
            reason = "wall-time limit reached";
            exit_code = 4;
            break;
        }
        if (opt.progress_every && cycle % opt.progress_every < 256)
            std::fprintf(stderr, "sim: %llu cycles\n", (unsigned long long)cycle);
    }

    if (access_log) std::fclose(access_log);
    const uint64_t cycle = sys.cycle();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    top->final();

    std::string json_path = opt.out_dir + "/run.json";
    if (FILE *f = std::fopen(json_path.c_str(), "w")) {
        std::fprintf(f, "{\n  \"nodes\": %d,\n  \"cycles\": %llu,\n  \"wall_seconds\": %.3f,\n"
                        "  \"cycles_per_second\": %.0f,\n  \"reason\": \"%s\",\n  \"marker_cycles\": [",
                     NV_NODES, (unsigned long long)cycle, wall, cycle / (wall > 0 ? wall : 1), reason.c_str());
        for (int i = 0; i < NV_NODES; i++) {
            if (consoles[i]->marker_seen())
                std::fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)consoles[i]->marker_cycle());
            else
                std::fprintf(f, "%snull", i ? ", " : "");
        }
        std::fprintf(f, "]");
        if (!traces.empty()) {
            std::fprintf(f, ",\n  \"trace_start\": %llu,\n  \"trace\": [", (unsigned long long)trace_start);
            for (int i = 0; i < NV_NODES; i++)
                std::fprintf(f, "%s{\"node\": %d, \"records\": %zu, \"accesses\": %llu, \"errors\": %llu, "
                                "\"finished\": %llu, \"compute\": %llu, \"memory\": %llu, \"barrier\": %llu}",
                             i ? ", " : "", i, traces[i]->size(), (unsigned long long)players[i]->completed(),
                             (unsigned long long)players[i]->errors(),
                             (unsigned long long)(traces[i]->finished_at() ? traces[i]->finished_at() - trace_start : 0),
                             (unsigned long long)traces[i]->compute_cycles(),
                             (unsigned long long)players[i]->memory_cycles(),
                             (unsigned long long)traces[i]->barrier_cycles());
            std::fprintf(f, "]");
        }
        if (opt.bridge_port) {
            std::fprintf(f, ",\n  \"bridge_accesses\": [");
            for (int i = 0; i < NV_NODES; i++)
                std::fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)bridges[i]->accesses());
            std::fprintf(f, "]");
        }
        std::fprintf(f, "\n}\n");
        std::fclose(f);
    }
    std::fprintf(stderr, "sim: stopped after %llu cycles (%.2f s, %.0f cycles/s): %s\n",
                 (unsigned long long)cycle, wall, cycle / (wall > 0 ? wall : 1), reason.c_str());
    for (int i = 0; i < NV_NODES; i++)
        if (!opt.stop_marker.empty() && !consoles[i]->marker_seen())
            std::fprintf(stderr, "sim: node %d never printed \"%s\"\n", i, opt.stop_marker.c_str());
    return exit_code;
}
