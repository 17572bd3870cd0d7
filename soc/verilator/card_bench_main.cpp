// Card cluster bench: N Numavia cards (no CPU) in a ring, in one Verilator model.
//
// Each card is brought up the way its firmware would (node id, microcode loaded through the
// control-store registers), then its host port runs random single-word loads and stores over a
// small hot set of lines, to force sharing, conflicts and evictions. Every access is logged; at
// the end every card's directory, tags and data are read through the debug registers and dumped,
// so that numavia.coherence_check can judge the run.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "verilated.h"

#include "cluster_ports.h"  // generated: NV_NODES, NodePorts, nv_bind_ports(), nv_clocks()
#include "card_config.h"    // generated: the card's parameters
#include "counters_table.h" // generated: every counter register
#include "numavia_regs.h"   // generated from gateware/regmap.py
#include "numavia_sci.h"    // generated from gateware/sci_packet.py
#include "bus_script.hpp"
#include "clocks.hpp"
#include "host_driver.hpp"
#include "ring_link.hpp"
#include "rng.hpp"
#include "trace_player.hpp"

namespace {

struct Options {
    uint64_t ops = 1000;                 // accesses per node
    uint64_t seed = 1;
    unsigned hot_lines = 2;              // hot lines in each node's slice
    unsigned words = 2;                  // words used in each hot line
    double write_fraction = 0.4;
    unsigned max_gap = 30;
    unsigned ring_delay = 4;
    double flip_rate = 0;                // ring faults (ring_link.hpp)
    double ring_drop = 0;
    double ring_duplicate = 0;
    bool numa = false;
    uint64_t max_cycles = 0;
    uint64_t watchdog = 2'000'000;
    std::string ucode, log = "accesses.log", dump = "state.json";
    std::string script;                  // scripted mode: steps run one at a time
    std::string trace_dir;               // trace mode: node<i>.trace for every node
    std::string latencies = "latencies.log";
};

// A scripted step: node, r(ead)/w(rite)/f(lush), host port address, value.
struct ScriptStep {
    int node;
    char op;
    uint32_t addr, value;
};

[[noreturn]] void usage(const char *msg) {
    std::fprintf(stderr, "bench: %s\n"
        "usage: Vcard_cluster --ucode FILE [--ops N] [--seed N] [--hot-lines N] [--words N]\n"
        "       [--write-fraction F] [--max-gap N] [--ring-delay N] [--flip-rate F]\n"
        "       [--ring-drop P] [--ring-duplicate P] [--numa]\n"
        "       [--max-cycles N] [--watchdog N] [--log FILE] [--dump FILE]\n", msg);
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
        if (a == "--ops") o.ops = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--seed") o.seed = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--hot-lines") o.hot_lines = std::atoi(value().c_str());
        else if (a == "--words") o.words = std::atoi(value().c_str());
        else if (a == "--write-fraction") o.write_fraction = std::atof(value().c_str());
        else if (a == "--max-gap") o.max_gap = std::atoi(value().c_str());
        else if (a == "--ring-delay") o.ring_delay = std::atoi(value().c_str());
        else if (a == "--flip-rate") o.flip_rate = std::atof(value().c_str());
        else if (a == "--ring-drop") o.ring_drop = std::atof(value().c_str());
        else if (a == "--ring-duplicate") o.ring_duplicate = std::atof(value().c_str());
        else if (a == "--numa") o.numa = true;
        else if (a == "--max-cycles") o.max_cycles = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--watchdog") o.watchdog = std::strtoull(value().c_str(), nullptr, 0);
        else if (a == "--ucode") o.ucode = value();
        else if (a == "--log") o.log = value();
        else if (a == "--dump") o.dump = value();
        else if (a == "--script") o.script = value();
        else if (a == "--trace-dir") o.trace_dir = value();
        else if (a == "--latencies") o.latencies = value();
        else if (a.rfind("+verilator+", 0) == 0) continue;
        else usage(("unknown argument " + a).c_str());
    }
    if (o.ucode.empty()) usage("--ucode is required");
    if (o.hot_lines * 5 >= NV_SLICE_LINES || o.words == 0 || o.words > NV_LINE_WORDS) usage("hot set does not fit");
    return o;
}

std::vector<ScriptStep> read_script(const std::string &path) {
    std::vector<ScriptStep> steps;
    std::FILE *f = std::fopen(path.c_str(), "r");
    if (!f) usage(("cannot read " + path).c_str());
    ScriptStep s;
    unsigned long addr, value;
    while (std::fscanf(f, "%d %c %li %li", &s.node, &s.op, &addr, &value) == 4) {
        if (s.node < 0 || s.node >= NV_NODES || (s.op != 'r' && s.op != 'w' && s.op != 'f'))
            usage(("bad step in " + path).c_str());
        s.addr = uint32_t(addr);
        s.value = uint32_t(value);
        steps.push_back(s);
    }
    std::fclose(f);
    return steps;
}

std::vector<uint64_t> read_ucode(const std::string &path) {
    std::vector<uint64_t> words;
    std::FILE *f = std::fopen(path.c_str(), "r");
    if (!f) usage(("cannot read " + path).c_str());
    unsigned long long w;
    while (std::fscanf(f, "%llx", &w) == 1) words.push_back(w);
    std::fclose(f);
    if (words.empty()) usage(("no microcode words in " + path).c_str());
    return words;
}

uint32_t host_address(unsigned home, uint32_t offset) { return home * NV_SLICE_BYTES + offset; }
uint32_t line_offset(unsigned line) { return (line * 5 % NV_SLICE_LINES) * NV_LINE_BYTES; }

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char **argv) {
    Options opt = parse(argc, argv);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const std::vector<uint64_t> ucode = read_ucode(opt.ucode);
    const std::vector<ScriptStep> script = opt.script.empty() ? std::vector<ScriptStep>() : read_script(opt.script);
    size_t step = 0;                 // scripted mode: the step in progress
    bool step_issued = false;
    uint64_t step_done_at = 0;
    uint32_t step_latency = 0;
    std::FILE *latency_log = nullptr;
    if (!script.empty()) {
        latency_log = std::fopen(opt.latencies.c_str(), "w");
        if (!latency_log) usage(("cannot write " + opt.latencies).c_str());
    }

    auto context = std::make_unique<VerilatedContext>();
    context->commandArgs(argc, argv);
    auto top = std::make_unique<ClusterModel>(context.get(), "cluster");
    NodePorts n[NV_NODES];
    nv_bind_ports(top.get(), n);
    ClockDomain sys(nv_clocks(top.get())[0]);

    std::FILE *log = nullptr;           // no access log when --log is empty (long traces)
    if (!opt.log.empty() && !(log = std::fopen(opt.log.c_str(), "w"))) usage(("cannot write " + opt.log).c_str());

    // The hot words, as host port addresses.
    std::vector<uint32_t> hot;
    for (unsigned home = 0; home < NV_NODES; home++)
        for (unsigned line = 0; line < opt.hot_lines; line++)
            for (unsigned w = 0; w < opt.words; w++)
                hot.push_back(host_address(home, line_offset(line) + (4 * 7 * w) % NV_LINE_BYTES));

    Barriers barriers(NV_NODES);
    std::vector<std::unique_ptr<TraceSource>> traces;
    if (!opt.trace_dir.empty())
        for (int i = 0; i < NV_NODES; i++)
            traces.emplace_back(new TraceSource(opt.trace_dir + "/node" + std::to_string(i) + ".trace", i, barriers));
    std::vector<std::unique_ptr<BusScript>> scripts;
    std::vector<std::unique_ptr<HostDriver>> hosts;
    std::vector<RingPins> ring_pins;
    std::vector<uint64_t> issued(NV_NODES, 0), writes(NV_NODES, 0);
    Rng traffic(opt.seed);
    for (int i = 0; i < NV_NODES; i++) {
        scripts.emplace_back(new BusScript(WishbonePins{n[i].regs_cyc, n[i].regs_stb, n[i].regs_we,
                                                        n[i].regs_sel, n[i].regs_ack, n[i].regs_err,
                                                        n[i].regs_adr, n[i].regs_dat_w, n[i].regs_dat_r}, i));
        auto source = [&, i](HostOp &op, uint64_t cycle) {
            if (!traces.empty()) return (*traces[i])(op, cycle);
            if (!script.empty()) {           // scripted: only this node's turn, once
                if (step >= script.size()) return Next::End;
                if (script[step].node != i || script[step].op == 'f' || step_issued) return Next::Wait;
                op = {script[step].op == 'w', script[step].addr, script[step].value, 0};
                step_issued = true;
                return Next::Op;
            }
            if (issued[i] >= opt.ops) return Next::End;
            issued[i]++;
            op.addr = hot[traffic.below(hot.size())];
            op.write = traffic.chance(opt.write_fraction);
            op.value = op.write ? uint32_t(i + 1) << 24 | uint32_t(++writes[i]) : 0;
            op.gap = traffic.below(opt.max_gap);
            return Next::Op;
        };
        hosts.emplace_back(new HostDriver(i, HostPins{n[i].host_req_valid, n[i].host_req_ready,
                                                      n[i].host_wdata_valid, n[i].host_wdata_ready,
                                                      n[i].host_resp_valid, n[i].host_resp_ready,
                                                      n[i].host_req_payload, n[i].host_wdata_payload,
                                                      n[i].host_resp_payload}, source, log));
        ring_pins.push_back({n[i].tx, n[i].rx});
        sys.add(scripts.back().get());
        sys.add(hosts.back().get());
    }
    RingFaults ring_faults;
    ring_faults.flip_rate = opt.flip_rate;
    ring_faults.drop = opt.ring_drop;
    ring_faults.duplicate = opt.ring_duplicate;
    ring_faults.max_packet = NV_SCI_MAX_PACKET_SYMBOLS;
    std::unique_ptr<Ring> ring_ptr;
    try {
        ring_ptr.reset(new Ring(ring_pins, opt.ring_delay, ring_faults, opt.seed ^ 0x5EED));
    } catch (const std::invalid_argument &e) {
        usage(e.what());
    }
    Ring &ring = *ring_ptr;
    sys.add(&ring);

    // Bring-up, as the firmware does it.
    for (int i = 0; i < NV_NODES; i++) {
        BusScript &s = *scripts[i];
        s.write(NV_CTRL_NODE_ID, i);
        s.write(NV_CTRL_CTRL, NV_CTRL_CTRL_NODE_ID_VALID_MASK | (opt.numa ? NV_CTRL_CTRL_NUMA_MODE_MASK : 0));
        s.write(NV_RAC_UCODE_ADDR, 0);
        for (uint64_t w : ucode) {
            s.write(NV_RAC_UCODE_WDATA_LO, uint32_t(w));
            s.write(NV_RAC_UCODE_WDATA_HI, uint32_t(w >> 32));
        }
        s.write(NV_RAC_CTRL, NV_RAC_CTRL_LOADED_MASK);
    }

    enum class Phase { BringUp, Traffic, Script, DumpTags, DumpData, Done } phase = Phase::BringUp;
    const size_t num_counters = sizeof kCounterRegisters / sizeof kCounterRegisters[0];
    struct Dump {
        std::vector<uint32_t> dir, home, tag, tag_line, cache, counters;
    };
    std::vector<Dump> dumps(NV_NODES);
    auto all_idle = [&]() {
        for (auto &s : scripts)
            if (!s->idle()) return false;
        return true;
    };
    auto debug_read = [&](BusScript &s, uint32_t what, uint32_t addr, uint32_t reg, uint32_t *out,
                          uint32_t reg2 = 0, uint32_t *out2 = nullptr) {
        s.write(NV_LAC_DEBUG_ADDR, addr);
        s.write(NV_LAC_DEBUG_CMD, what);
        s.poll(NV_LAC_STATUS, NV_LAC_STATUS_DEBUG_BUSY_MASK, 0);
        s.read(reg, out);
        if (out2) s.read(reg2, out2);
    };

    const auto wall_start = std::chrono::steady_clock::now();
    uint64_t traffic_start = 0, traffic_end = 0;
    int exit_code = 0;
    std::string reason;
    top->rst = 1;
    for (;;) {
        // One sys cycle: inputs, evaluate, sample, rising edge.
        top->rst = sys.cycle() < 8;
        sys.fall();
        sys.drive();
        top->eval();
        sys.sample();
        sys.rise();
        top->eval();
        const uint64_t cycle = sys.cycle();
        if ((cycle & 63) != 0) continue;
        if (g_stop) { reason = "interrupted"; exit_code = 130; break; }
        if (opt.max_cycles && cycle >= opt.max_cycles) { reason = "cycle limit"; exit_code = 3; break; }
        if (phase == Phase::BringUp && all_idle()) {
            phase = script.empty() ? Phase::Traffic : Phase::Script;
            traffic_start = cycle;
            for (auto &h : hosts) h->enable();
        } else if (phase == Phase::Script) {
            // Run each step to completion, let the ring settle, then read the card's own
            // measurement of it (LAC.LAST_LATENCY).
            if (step >= script.size()) {
                traffic_end = cycle;
                phase = Phase::Done;
                reason = "script done";
                break;
            }
            const ScriptStep &s = script[step];
            if (s.op == 'f' && !step_issued) {
                scripts[s.node]->write(NV_LAC_COMMAND, NV_LAC_COMMAND_FLUSH_MASK);
                scripts[s.node]->poll(NV_LAC_STATUS, NV_LAC_STATUS_FLUSH_BUSY_MASK, 0);
                step_issued = true;
            }
            const bool finished = s.op == 'f' ? scripts[s.node]->idle() : hosts[s.node]->completed() > issued[s.node];
            if (step_issued && finished && !step_done_at) {
                issued[s.node] = hosts[s.node]->completed();
                step_done_at = cycle;
                scripts[s.node]->read(NV_LAC_LAST_LATENCY, &step_latency);
            } else if (step_done_at && cycle - step_done_at > 2000 && all_idle()) {
                std::fprintf(latency_log, "%zu %d %c %u %u\n", step, s.node, s.op, s.addr,
                             s.op == 'f' ? 0u : step_latency);
                step++;
                step_issued = false;
                step_done_at = 0;
            }
        } else if (phase == Phase::Traffic) {
            bool done = true;
            for (int i = 0; i < NV_NODES; i++) {
                done &= hosts[i]->done();
                if (hosts[i]->waiting(cycle) > opt.watchdog) {
                    std::fprintf(stderr, "bench: node %d: %s at %#x pending for %llu cycles: deadlock?\n", i,
                                 hosts[i]->current().write ? "write" : "read", hosts[i]->current().addr,
                                 (unsigned long long)hosts[i]->waiting(cycle));
                    reason = "watchdog";
                    exit_code = 4;
                }
            }
            if (exit_code) break;
            if (done) {
                traffic_end = cycle;
                phase = Phase::DumpTags;
                for (int i = 0; i < NV_NODES; i++) {
                    Dump &d = dumps[i];
                    d.dir.resize(opt.hot_lines);
                    d.home.resize(opt.hot_lines * NV_LINE_WORDS);
                    d.tag.resize(NV_CACHE_SETS * NV_CACHE_WAYS);
                    d.tag_line.resize(NV_CACHE_SETS * NV_CACHE_WAYS);
                    d.cache.assign(NV_CACHE_SETS * NV_CACHE_WAYS * NV_LINE_WORDS, 0);
                    d.counters.resize(num_counters);
                    for (size_t k = 0; k < num_counters; k++)
                        scripts[i]->read(kCounterRegisters[k].offset, &d.counters[k]);
                    for (unsigned line = 0; line < opt.hot_lines; line++) {
                        const uint32_t global = uint32_t(i) << 26 | line_offset(line);
                        debug_read(*scripts[i], 0, global, NV_LAC_DEBUG_DIR, &d.dir[line]);
                        for (unsigned w = 0; w < NV_LINE_WORDS; w++)
                            debug_read(*scripts[i], 2, line_offset(line) / 4 + w, NV_LAC_DEBUG_DATA,
                                       &d.home[line * NV_LINE_WORDS + w]);
                    }
                    for (unsigned k = 0; k < NV_CACHE_SETS * NV_CACHE_WAYS; k++)
                        debug_read(*scripts[i], 1, k, NV_LAC_DEBUG_TAG, &d.tag[k], NV_LAC_DEBUG_TAG_LINE, &d.tag_line[k]);
                }
            }
        } else if (phase == Phase::DumpTags && all_idle()) {
            phase = Phase::DumpData;
            for (int i = 0; i < NV_NODES; i++)
                for (unsigned k = 0; k < NV_CACHE_SETS * NV_CACHE_WAYS; k++)
                    if (dumps[i].tag[k] & 0xF)
                        for (unsigned w = 0; w < NV_LINE_WORDS; w++)
                            debug_read(*scripts[i], 3, k * NV_LINE_WORDS + w, NV_LAC_DEBUG_DATA,
                                       &dumps[i].cache[k * NV_LINE_WORDS + w]);
        } else if (phase == Phase::DumpData && all_idle()) {
            reason = "done";
            break;
        }
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    top->final();
    if (log) std::fclose(log);
    if (latency_log) std::fclose(latency_log);

    if (FILE *f = std::fopen(opt.dump.c_str(), "w")) {
        std::fprintf(f, "{\"reason\": \"%s\", \"cycles\": %llu, \"traffic_cycles\": %llu, \"wall_seconds\": %.3f, "
                        "\"ring_flips\": %llu, \"ring_packets\": %llu, \"ring_dropped\": %llu, "
                        "\"ring_duplicated\": %llu, ", reason.c_str(), (unsigned long long)sys.cycle(),
                     (unsigned long long)(traffic_end - traffic_start), wall, (unsigned long long)ring.counts().flips,
                     (unsigned long long)ring.counts().packets, (unsigned long long)ring.counts().dropped,
                     (unsigned long long)ring.counts().duplicated);
        std::fprintf(f, "\"trace\": [");
        for (size_t i = 0; i < traces.size(); i++)
            std::fprintf(f, "%s{\"node\": %zu, \"records\": %zu, \"accesses\": %llu, \"errors\": %llu, "
                            "\"finished\": %llu, \"compute\": %llu, \"memory\": %llu, \"barrier\": %llu}",
                         i ? ", " : "", i, traces[i]->size(), (unsigned long long)hosts[i]->completed(),
                         (unsigned long long)hosts[i]->errors(),
                         (unsigned long long)(traces[i]->finished_at() - traffic_start),
                         (unsigned long long)traces[i]->compute_cycles(), (unsigned long long)hosts[i]->memory_cycles(),
                         (unsigned long long)traces[i]->barrier_cycles());
        std::fprintf(f, "], \"nodes\": [\n");
        for (int i = 0; i < NV_NODES; i++) {
            const Dump &d = dumps[i];
            std::fprintf(f, "%s {\"node\": %d, \"dir\": [", i ? ",\n" : "", i);
            for (size_t k = 0; k < d.dir.size(); k++) std::fprintf(f, "%s%u", k ? ", " : "", d.dir[k]);
            std::fprintf(f, "], \"home\": [");
            for (size_t k = 0; k < d.home.size(); k++) std::fprintf(f, "%s%u", k ? ", " : "", d.home[k]);
            std::fprintf(f, "], \"tag\": [");
            for (size_t k = 0; k < d.tag.size(); k++) std::fprintf(f, "%s%u", k ? ", " : "", d.tag[k]);
            std::fprintf(f, "], \"tag_line\": [");
            for (size_t k = 0; k < d.tag_line.size(); k++) std::fprintf(f, "%s%u", k ? ", " : "", d.tag_line[k]);
            std::fprintf(f, "], \"cache\": [");
            for (size_t k = 0; k < d.cache.size(); k++) std::fprintf(f, "%s%u", k ? ", " : "", d.cache[k]);
            std::fprintf(f, "], \"counters\": {");
            for (size_t k = 0; k < d.counters.size(); k++)
                std::fprintf(f, "%s\"%s\": %u", k ? ", " : "", kCounterRegisters[k].name, d.counters[k]);
            std::fprintf(f, "}}");
        }
        std::fprintf(f, "\n]}\n");
        std::fclose(f);
    }
    std::fprintf(stderr, "bench: %s after %llu cycles (%.2f s, %.0f cycles/s)\n", reason.c_str(),
                 (unsigned long long)sys.cycle(), wall, sys.cycle() / (wall > 0 ? wall : 1));
    return exit_code;
}
