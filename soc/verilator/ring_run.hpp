// What every ring simulator shares: the options that shape the ring, the node interface, and
// the run itself (arena, local nodes, the hub in process 0, the scheduler, results).
//
// The simulator binary runs one process's share of the ring: `--procs P --rank R --arena FILE`
// (the `numavia` launcher starts the P processes), or one MPI rank of `mpirun` with `--mpi`.
// Every node writes node<i>.json into the run folder, every process process<R>.json (its processor
// time) and the hub hub.json; the launcher merges them into run.json.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/prctl.h>

#include "arena.hpp"
#include "entity.hpp"
#include "gmii_link.hpp"
#include "hub.hpp"
#include "ring_link.hpp"
#include "scheduler.hpp"
#ifdef NV_WITH_MPI
#include "mpi_transport.hpp"
#endif

struct RingOptions {
    int nodes = 1;
    int processes = 1;
    int rank = 0;
    std::string arena;   // shared-memory file of a multi-process run
    bool mpi = false;
    std::string out_dir = ".";
    unsigned ring_delay = 4;   // sys cycles per ring hop (link + cable)
    RingFaults ring_faults;
    uint64_t seed = 1;
    bool ethernet = false;         // the nodes have GMII ports (set by the simulator)
    GmiiLinkOptions eth;           // --eth-*: the Ethernet switch between the nodes
    uint64_t hub_latency = 8;      // without Ethernet: sys cycles to and from the hub
    uint64_t max_cycles = 0;       // 0: no limit
    double wall_limit = 0;         // seconds of wall time before giving up (0: none)
    uint64_t progress_every = 0;   // cycles between progress lines on stderr (0: none)

    static constexpr const char *kUsage =
        "       [--nodes N] [--procs P --rank R --arena FILE | --mpi] [--out-dir DIR]\n"
        "       [--ring-delay CYCLES] [--ring-flip-rate F] [--ring-drop P] [--ring-duplicate P] [--seed N]\n"
        "       [--eth-delay CYCLES] [--eth-loss P] [--eth-corrupt P] [--eth-duplicate P] [--eth-reorder P]\n"
        "       [--eth-seed N] [--hub-latency CYCLES] [--max-cycles N] [--wall-limit SECONDS] [--progress CYCLES]\n";

    // Take `a` (and its value, from `value()`) if it is a ring option; error text otherwise set.
    template <typename Value>
    bool take(const std::string &a, Value value, std::string &error) {
        if (a == "--nodes") nodes = std::atoi(value().c_str());
        else if (a == "--procs") processes = std::atoi(value().c_str());
        else if (a == "--rank") rank = std::atoi(value().c_str());
        else if (a == "--arena") arena = value();
        else if (a == "--mpi") mpi = true;
        else if (a == "--out-dir") out_dir = value();
        else if (a == "--ring-delay") ring_delay = unsigned(std::atoi(value().c_str()));
        else if (a == "--ring-flip-rate") ring_faults.flip_rate = std::atof(value().c_str());
        else if (a == "--ring-drop") ring_faults.drop = std::atof(value().c_str());
        else if (a == "--ring-duplicate") ring_faults.duplicate = std::atof(value().c_str());
        else if (a == "--seed") seed = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--hub-latency") hub_latency = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--max-cycles") max_cycles = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--wall-limit") wall_limit = std::atof(value().c_str());
        else if (a == "--progress") progress_every = std::strtoull(value().c_str(), nullptr, 0);
        else if (GmiiLinkOptions::accepts(a)) return eth.set(a, value(), error);
        else return false;
        return true;
    }

    // `max_nodes`: what the node ids allow.
    std::string check(int max_nodes) const {
        if (nodes < 1 || nodes > max_nodes) return "--nodes must be 1.." + std::to_string(max_nodes);
        if (!mpi && (processes < 1 || processes > nodes)) return "--procs must be 1..nodes";
        if (!mpi && (rank < 0 || rank >= processes)) return "--rank must be 0..procs-1";
        if (!mpi && processes > 1 && arena.empty()) return "--procs > 1 needs --arena";
        if (ring_delay < 1) return "--ring-delay must be at least 1";
        if (!ethernet && hub_latency < 1) return "--hub-latency must be at least 1";
        return "";
    }
};

// Walks a simulator's command line: the ring's options go to `ring`, every other one to
// `own(argument, value)`, which returns false for one it does not know; Verilator's own
// `+verilator+...` arguments pass. Bad input ends in `usage(message)`, which does not return.
template <typename Own, typename Usage>
void parse_command_line(int argc, char **argv, RingOptions &ring, Own own, Usage usage) {
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage("missing value for " + a);
            return argv[++i];
        };
        std::string error;
        if (ring.take(a, value, error)) continue;
        if (!error.empty()) usage(error);
        if (a.rfind("+verilator+", 0) == 0) continue;
        if (!own(a, value)) usage("unknown argument " + a);
    }
}

// One node of the ring, as the run sees it.
class RingNode : public Entity {
public:
    explicit RingNode(int id) : id_(id) {}
    int id() const { return id_; }
    std::string name() const override { return "node" + std::to_string(id_); }
    virtual uint64_t sys_cycle() const = 0;
    // The node's results: the members of a JSON object (without braces).
    virtual void write_result(std::FILE *f) = 0;

private:
    int id_;
};

// Everything a node needs to join the ring: its channels, with their latencies.
struct NodeLinks {
    int node;
    Queue &ring_out;
    Inlet ring_in;             // from the previous node
    Queue *eth_up = nullptr;   // with Ethernet
    Inlet eth_down;
    Queue &control_up;
    Inlet control_down;
    RingFaults ring_faults;
    unsigned ring_delay;
    uint64_t ring_seed;   // the generator of the link into this node
};

// The hub's clock period and latencies: the Ethernet switch's with Ethernet, else the sys clock's.
struct HubTiming {
    uint64_t period_ps, to_hub, from_hub;
    static HubTiming of(const RingOptions &o, uint64_t sys_period_ps, uint64_t eth_period_ps) {
        if (o.ethernet) return {eth_period_ps, o.eth.to_switch(), o.eth.from_switch()};
        return {sys_period_ps, o.hub_latency, o.hub_latency};
    }
};

using NodeFactory = std::function<std::unique_ptr<RingNode>(const NodeLinks &)>;

// Run this process's share of the ring; returns the process's exit status.
inline int run_ring(int argc, char **argv, RingOptions opt, const RunPlan &plan, uint64_t sys_period_ps,
                    uint64_t eth_period_ps, const NodeFactory &make_node) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);   // never outlive the launcher that started us
    std::unique_ptr<Relay> relay;
#ifdef NV_WITH_MPI
    if (opt.mpi) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &opt.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &opt.processes);
        if (opt.processes > opt.nodes) {
            if (opt.rank == 0)
                std::fprintf(stderr, "sim: %d MPI ranks for %d nodes: at most one rank per node\n", opt.processes,
                             opt.nodes);
            MPI_Finalize();
            return 2;
        }
    }
#else
    (void)argc;
    (void)argv;
    if (opt.mpi) {
        std::fprintf(stderr, "sim: this simulator was built without MPI (numavia builds the MPI one for --mpi)\n");
        return 2;
    }
#endif
    Arena arena(opt.mpi ? "" : opt.arena, opt.nodes, opt.processes, opt.ethernet);
#ifdef NV_WITH_MPI
    if (opt.mpi) relay.reset(new MpiRelay(arena, opt.rank, opt.processes));
#endif
    const HubTiming hub = HubTiming::of(opt, sys_period_ps, eth_period_ps);
    const int me = opt.rank;

    std::vector<std::unique_ptr<RingNode>> nodes;
    for (int i : arena.nodes_of(me)) {
        const int previous = (i + opt.nodes - 1) % opt.nodes;
        NodeLinks links{i,
                        arena.queue(Channel::Ring, i),
                        {&arena.queue(Channel::Ring, previous),
                         RingReceiver::channel_latency_ps(opt.ring_delay, opt.ring_faults, sys_period_ps)},
                        opt.ethernet ? &arena.queue(Channel::EthUp, i) : nullptr,
                        {opt.ethernet ? &arena.queue(Channel::EthDown, i) : nullptr, hub.from_hub * hub.period_ps},
                        arena.queue(Channel::ControlUp, i),
                        {&arena.queue(Channel::ControlDown, i), hub.from_hub * hub.period_ps},
                        opt.ring_faults,
                        opt.ring_delay,
                        opt.seed * 0x9E3779B97F4A7C15ull + uint64_t(previous) + 1};
        nodes.push_back(make_node(links));
    }
    std::unique_ptr<Hub> hub_entity;
    if (me == Arena::process_of_hub())
        hub_entity.reset(
            new Hub(arena, hub.period_ps, hub.to_hub, plan, opt.ethernet ? &opt.eth : nullptr, opt.out_dir));

    SchedulerOptions so;
    so.process = me;
    so.shared_memory = !opt.mpi && opt.processes > 1;
    so.wall_limit = opt.wall_limit;
    so.progress_every = opt.progress_every;
    so.sys_period_ps = sys_period_ps;
    Scheduler scheduler(arena, so, relay.get());
    Scheduler::install_signal_handlers();
    auto others = [&](std::vector<int> consumers) {
        std::vector<int> v;
        for (int p : consumers)
            if (p != me && std::find(v.begin(), v.end(), p) == v.end()) v.push_back(p);
        return v;
    };
    for (auto &n : nodes) {
        const int i = n->id();
        scheduler.add(n.get(), others({arena.consumer(Channel::Ring, i), Arena::process_of_hub()}));
        RingNode *node = n.get();
        scheduler.track(i, [node] { return node->sys_cycle(); });
    }
    if (hub_entity) {
        std::vector<int> consumers;
        for (int i = 0; i < opt.nodes; i++) consumers.push_back(arena.process_of_node(i));
        scheduler.add(hub_entity.get(), others(consumers));
        Hub *h = hub_entity.get();
        scheduler.on_stop_request([h](const std::string &reason, int code) { h->request_stop(reason, code); });
    }
    scheduler.run();

    for (auto &n : nodes) {
        const std::string path = opt.out_dir + "/" + n->name() + ".json";
        if (std::FILE *f = std::fopen(path.c_str(), "w")) {
            std::fprintf(f, "{");
            n->write_result(f);
            std::fprintf(f, "}\n");
            std::fclose(f);
        } else {
            std::fprintf(stderr, "sim: cannot write %s\n", path.c_str());
        }
    }
    {
        const std::string path = opt.out_dir + "/process" + std::to_string(opt.rank) + ".json";
        if (std::FILE *f = std::fopen(path.c_str(), "w")) {
            std::fprintf(f, "{\"process\": %d, \"cpu_seconds\": %.3f}\n", opt.rank, scheduler.cpu_seconds());
            std::fclose(f);
        }
    }
    int status = 0;
    if (hub_entity) {
        const std::string path = opt.out_dir + "/hub.json";
        if (std::FILE *f = std::fopen(path.c_str(), "w")) {
            std::fprintf(f,
                         "{\"reason\": \"%s\", \"exit_code\": %d, \"wall_seconds\": %.3f, \"processes\": %d, "
                         "\"mpi\": %s}\n",
                         hub_entity->reason().c_str(), hub_entity->exit_code(), scheduler.wall_seconds(), opt.processes,
                         opt.mpi ? "true" : "false");
            std::fclose(f);
        }
        status = hub_entity->exit_code();
    }
    if (opt.mpi) status = 0;   // mpirun would take it for a failed rank: the launcher reads hub.json
    nodes.clear();
    hub_entity.reset();
#ifdef NV_WITH_MPI
    if (opt.mpi) {
        relay.reset();
        MPI_Finalize();
    }
#endif
    return status;
}
