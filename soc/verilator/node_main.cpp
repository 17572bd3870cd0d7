// Numavia ring simulation: nodes of the SoC (VexRiscv, firmware, card), one Verilator model each,
// joined by ring and Ethernet channels (ring_run.hpp). One model serves every ring size and every
// node id: the id strap is an input.
//
// Around each node: its UART console (and, asked for, its input: a TCP socket on port base + id, or
// this process's standard input for one node), its host bridge (Etherbone over TCP on port base +
// id), and trace replay on the card's second host port. Console input arrives when the user types:
// a run that takes any is no longer reproducible, so none is read unless asked for. The run stops when every node
// printed the stop marker, at a cycle limit, on SIGINT/SIGTERM, or (with --serve) when the last host disconnects.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "verilated.h"

#include "model_ports.h"    // generated: Model, NodePorts, nv_bind_ports(), nv_clocks(), NV_MAX_NODES
#include "numavia_regs.h"   // generated from host/numavia/base/regmap.py
#include "clocks.hpp"
#include "console.hpp"
#include "etherbone_server.hpp"
#include "gmii_link.hpp"
#include "host_driver.hpp"
#include "node_control.hpp"
#include "ring_link.hpp"
#include "ring_run.hpp"
#include "trace_player.hpp"

namespace {

struct Options {
    RingOptions ring;
    std::string stop_marker;         // stop when every node printed a line containing this
    int bridge_port = 0;             // 0: no host bridge; node i listens on bridge_port + i
    int console_port = 0;            // 0: no console input socket; node i listens on console_port + i
    int console_stdin = -1;          // the node whose UART receives standard input (its process gets it)
    bool serve = false;              // keep running after the marker, until a signal
    bool until_disconnect = false;   // ... or until the last host that connected disconnects
    bool quiet = false;
    std::string trace_dir;           // replay node<i>.trace on each node's host port once all are ready
    std::string access_log;          // with --trace-dir: node i logs its replayed accesses to FILE.node<i>
    bool numa = false;               // set every node's NUMA switch (regmap.CTRL.MODE_STRAP)
    bool cache_first_miss = false;   // ... and its CACHE_FIRST_MISS switch
};

[[noreturn]] void usage(const std::string &msg) {
    std::fprintf(stderr,
                 "sim: %s\n"
                 "usage: Vnumavia_node [--stop-marker TEXT] [--bridge-port PORT] [--serve] [--until-disconnect]\n"
                 "       [--quiet] [--trace-dir DIR] [--access-log FILE] [--numa] [--cache-first-miss]\n"
                 "       [--console-port PORT] [--console-stdin NODE]\n%s",
                 msg.c_str(), RingOptions::kUsage);
    std::exit(2);
}

Options parse(int argc, char **argv) {
    Options o;
    o.ring.ethernet = NV_ETHERNET;
    parse_command_line(
        argc, argv, o.ring,
        [&](const std::string &a, auto &value) {
            if (a == "--stop-marker") o.stop_marker = value();
            else if (a == "--bridge-port") o.bridge_port = std::atoi(value().c_str());
            else if (a == "--console-port") o.console_port = std::atoi(value().c_str());
            else if (a == "--console-stdin") o.console_stdin = std::atoi(value().c_str());
            else if (a == "--serve") o.serve = true;
            else if (a == "--until-disconnect") o.until_disconnect = true;
            else if (a == "--quiet") o.quiet = true;
            else if (a == "--trace-dir") o.trace_dir = value();
            else if (a == "--access-log") o.access_log = value();
            else if (a == "--numa") o.numa = true;
            else if (a == "--cache-first-miss") o.cache_first_miss = true;
            else return false;
            return true;
        },
        usage);
    const std::string error = o.ring.check(NV_MAX_NODES);
    if (!error.empty()) usage(error);
    if (o.serve && !o.bridge_port) usage("--serve needs --bridge-port");
    if (o.until_disconnect && !o.serve) usage("--until-disconnect goes with --serve");
    if (o.console_stdin >= o.ring.nodes) usage("--console-stdin names a node the ring does not have");
    return o;
}

class SocNode : public RingNode {
public:
    SocNode(const NodeLinks &links, const Options &opt)
        : RingNode(links.node), opt_(opt), context_(new VerilatedContext), model_(new Model(context_.get(), "node")),
          clocks_(model_.get(), nv_clocks(model_.get())), sys_(clocks_[0]),
          control_(links.control_up, links.control_down, sys_) {
        nv_bind_ports(model_.get(), &ports_);
        *ports_.node_id_strap = CData(id());
        *ports_.mode_strap = CData((opt.numa ? NV_CTRL_MODE_STRAP_NUMA_MASK : 0) |
                                   (opt.cache_first_miss ? NV_CTRL_MODE_STRAP_CACHE_FIRST_MISS_MASK : 0));
        add_output(links.control_up);
        add_input(*links.control_down.queue, links.control_down.latency_ps);

        const bool reads_stdin = id() == opt.console_stdin;
        if (opt.console_port || reads_stdin)
            console_input_.reset(
                new ConsoleInput(id(), opt.console_port ? opt.console_port + id() : 0, reads_stdin ? 0 : -1));
        console_.reset(new Console<NodePorts>(ports_, id(), opt.ring.out_dir + "/" + name() + ".log", opt.stop_marker,
                                              !opt.quiet, console_input_.get()));
        sys_.add(console_.get());
        if (opt.bridge_port) {
            bridge_.reset(new EtherboneServer<NodePorts>(ports_, id(), opt.bridge_port + id()));
            sys_.add(bridge_.get());
        }
        if (!opt.trace_dir.empty()) {
            if (!opt.access_log.empty()) {
                const std::string path = opt.access_log + "." + name();
                if (!(access_log_ = std::fopen(path.c_str(), "w"))) usage("cannot write " + path);
            }
            trace_.reset(new TraceSource(opt.trace_dir + "/" + name() + ".trace", id(), control_));
            TraceSource *source = trace_.get();
            player_.reset(new HostDriver(
                id(),
                HostPins{ports_.hostport_req_valid, ports_.hostport_req_ready, ports_.hostport_wdata_valid,
                         ports_.hostport_wdata_ready, ports_.hostport_resp_valid, ports_.hostport_resp_ready,
                         ports_.hostport_req_payload, ports_.hostport_wdata_payload, ports_.hostport_resp_payload},
                [source](HostOp &op, uint64_t cycle) { return (*source)(op, cycle); }, access_log_));
            sys_.add(player_.get());
        }

        ring_tx_.reset(new RingTransmitter(ports_.ring_tx, links.ring_out, sys_));
        ring_rx_.reset(new RingReceiver(ports_.ring_rx, links.ring_in, sys_, links.ring_delay, links.ring_faults,
                                        links.ring_seed));
        sys_.add(ring_rx_.get());
        sys_.add(ring_tx_.get());
        add_output(links.ring_out);
        add_input(*links.ring_in.queue, links.ring_in.latency_ps);
#if NV_ETHERNET
        ClockDomain *eth = clocks_.find("eth");
        gmii_.reset(new GmiiPort(ports_.eth_tx_en, ports_.eth_tx_data, ports_.eth_rx_dv, ports_.eth_rx_data,
                                 *links.eth_up, links.eth_down, *eth));
        eth->add(gmii_.get());
        add_output(*links.eth_up);
        add_input(*links.eth_down.queue, links.eth_down.latency_ps);
#endif
        *ports_.sys_rst = 1;
        model_->eval();
        clocks_.settled();
    }

    ~SocNode() override {
        if (access_log_) std::fclose(access_log_);
        model_->final();
    }

    uint64_t next_edge() const override { return stopped_ ? kForever : clocks_.next_rise_ps(); }
    uint64_t sys_cycle() const override { return sys_.cycle(); }

    void step() override {
        const uint64_t t = clocks_.next_rise_ps();
        control_.receive(t);
        if (control_.stop) return stop();
        if (control_.start) {   // every node is ready: replay the traces
            control_.start = false;
            trace_start_ = sys_.cycle();
            if (player_) player_->enable();
        }
        clocks_.step([&](uint64_t) { *ports_.sys_rst = sys_.cycle() < kResetCycles; });
        report(t);
        if (opt_.ring.max_cycles && sys_.cycle() >= opt_.ring.max_cycles) stop();
    }

    void poll() override {
        for (auto &d : clocks_.domains()) d.poll();
    }

    void write_result(std::FILE *f) override {
        std::fprintf(f, "\"node\": %d, \"cycles\": %llu, ", id(), (unsigned long long)sys_.cycle());
        if (console_->marker_seen())
            std::fprintf(f, "\"marker_cycle\": %llu", (unsigned long long)console_->marker_cycle());
        else std::fprintf(f, "\"marker_cycle\": null");
        if (trace_)
            std::fprintf(
                f,
                ", \"trace_start\": %llu, \"trace\": {\"node\": %d, \"records\": %zu, \"accesses\": %llu, "
                "\"errors\": %llu, \"finished\": %llu, \"compute\": %llu, \"memory\": %llu, \"barrier\": %llu}",
                (unsigned long long)trace_start_, id(), trace_->size(), (unsigned long long)player_->completed(),
                (unsigned long long)player_->errors(),
                (unsigned long long)(trace_->finished_at() ? trace_->finished_at() - trace_start_ : 0),
                (unsigned long long)trace_->compute_cycles(), (unsigned long long)player_->memory_cycles(),
                (unsigned long long)trace_->barrier_cycles());
        if (bridge_) std::fprintf(f, ", \"bridge_accesses\": %llu", (unsigned long long)bridge_->accesses());
        const RingFaultCounts &rc = ring_rx_->counts();
        std::fprintf(f, ", \"ring_in\": {\"packets\": %llu, \"flips\": %llu, \"dropped\": %llu, \"duplicated\": %llu}",
                     (unsigned long long)rc.packets, (unsigned long long)rc.flips, (unsigned long long)rc.dropped,
                     (unsigned long long)rc.duplicated);
    }

private:
    static constexpr uint64_t kResetCycles = 16;

    // Tell the hub what changed at the edge just processed.
    void report(uint64_t t) {
        if (!ready_sent_ && console_->marker_seen()) {
            ready_sent_ = true;
            control_.send(t, kReady);
        }
        if (player_ && !done_sent_ && player_->done()) {
            done_sent_ = true;
            control_.send(t, kDone);
        }
        if (bridge_ && bridge_->connected() != connected_) {
            connected_ = bridge_->connected();
            control_.send(t, connected_ ? kBridgeConnected : kBridgeDisconnected);
        }
    }

    void stop() { stopped_ = true; }

    Options opt_;
    std::unique_ptr<VerilatedContext> context_;
    std::unique_ptr<Model> model_;
    NodePorts ports_{};
    Clocks<Model, ModelInputs> clocks_;
    ClockDomain &sys_;
    NodeControl control_;
    std::unique_ptr<ConsoleInput> console_input_;
    std::unique_ptr<Console<NodePorts>> console_;
    std::unique_ptr<EtherboneServer<NodePorts>> bridge_;
    std::unique_ptr<TraceSource> trace_;
    std::unique_ptr<HostDriver> player_;
    std::unique_ptr<RingTransmitter> ring_tx_;
    std::unique_ptr<RingReceiver> ring_rx_;
    std::unique_ptr<GmiiPort> gmii_;
    std::FILE *access_log_ = nullptr;
    uint64_t trace_start_ = 0;
    bool stopped_ = false, ready_sent_ = false, done_sent_ = false, connected_ = false;
};

}   // namespace

int main(int argc, char **argv) {
    const Options opt = parse(argc, argv);
    RunPlan plan;
    if (!opt.trace_dir.empty()) {
        plan.start_after_ready = true;
        plan.stop_when_done = !opt.serve;
    } else {
        plan.stop_when_ready = !opt.serve && !opt.stop_marker.empty();
    }
    plan.until_disconnect = opt.until_disconnect;
    try {
        return run_ring(argc, argv, opt.ring, plan, NV_SYS_PERIOD_PS, NV_ETH_PERIOD_PS,
                        [&opt](const NodeLinks &links) { return std::unique_ptr<RingNode>(new SocNode(links, opt)); });
    } catch (const std::exception &e) {
        std::fprintf(stderr, "sim: %s\n", e.what());
        return 1;
    }
}
