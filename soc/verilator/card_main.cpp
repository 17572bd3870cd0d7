// Card ring bench: Numavia cards (no CPU) in a ring, one Verilator model each (ring_run.hpp).
//
// Each card is brought up the way its firmware would (node id, microcode loaded through the
// control-store registers). Then, when the hub says every card is up, its host port runs one of:
// random single-word loads and stores over a small hot set of lines (to force sharing, conflicts
// and evictions; every access logged); a script of steps run one at a time across the ring, each
// measured by the card's own latency counter; or a trace (numavia.base.trace) with barriers. At the end
// every card's directory, tags and data are read through the debug registers and written out, so
// that numavia.gateware.microcode.coherence_check can judge the run.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "verilated.h"

#include "model_ports.h"      // generated: Model, NodePorts, nv_bind_ports(), nv_clocks(), NV_MAX_NODES
#include "card_config.h"      // generated: the card's parameters
#include "counters_table.h"   // generated: every counter register
#include "numavia_regs.h"     // generated from host/numavia/base/regmap.py
#include "numavia_sci.h"      // generated from host/numavia/base/sci_packet.py
#include "bus_script.hpp"
#include "clocks.hpp"
#include "host_driver.hpp"
#include "node_control.hpp"
#include "ring_link.hpp"
#include "ring_run.hpp"
#include "rng.hpp"
#include "trace_player.hpp"

namespace {

struct Options {
    RingOptions ring;
    uint64_t ops = 1000;      // accesses per node
    unsigned hot_lines = 2;   // hot lines in each node's slice
    unsigned words = 2;       // words used in each hot line
    double write_fraction = 0.4;
    unsigned max_gap = 30;
    bool numa = false;
    bool cache_first_miss = false;   // the local access controller's allocation filter off
    bool microcode_only = false;     // the sequencer's hard-wired fast path off
    uint64_t watchdog = 2'000'000;
    std::string ucode;
    bool access_log = true;   // every access to accesses.node<i>.log (off for long traces)
    std::string script;       // scripted mode: steps run one at a time
    std::string trace_dir;    // trace mode: node<i>.trace for every node
};

// A scripted step: node, r(ead)/w(rite)/f(lush), host port address, value.
struct ScriptStep {
    int node;
    char op;
    uint32_t addr, value;
};

[[noreturn]] void usage(const std::string &msg) {
    std::fprintf(stderr,
                 "bench: %s\n"
                 "usage: Vnumavia_card --ucode FILE [--ops N] [--hot-lines N] [--words N] [--write-fraction F]\n"
                 "       [--max-gap N] [--numa] [--cache-first-miss] [--microcode-only] [--watchdog N] "
                 "[--no-access-log] [--script FILE] "
                 "[--trace-dir DIR]\n%s",
                 msg.c_str(), RingOptions::kUsage);
    std::exit(2);
}

Options parse(int argc, char **argv) {
    Options o;
    parse_command_line(
        argc, argv, o.ring,
        [&](const std::string &a, auto &value) {
            if (a == "--ops") o.ops = std::strtoull(value().c_str(), nullptr, 0);
            else if (a == "--hot-lines") o.hot_lines = std::atoi(value().c_str());
            else if (a == "--words") o.words = std::atoi(value().c_str());
            else if (a == "--write-fraction") o.write_fraction = std::atof(value().c_str());
            else if (a == "--max-gap") o.max_gap = std::atoi(value().c_str());
            else if (a == "--numa") o.numa = true;
            else if (a == "--cache-first-miss") o.cache_first_miss = true;
            else if (a == "--microcode-only") o.microcode_only = true;
            else if (a == "--watchdog") o.watchdog = std::strtoull(value().c_str(), nullptr, 0);
            else if (a == "--ucode") o.ucode = value();
            else if (a == "--no-access-log") o.access_log = false;
            else if (a == "--script") o.script = value();
            else if (a == "--trace-dir") o.trace_dir = value();
            else return false;
            return true;
        },
        usage);
    o.ring.ring_faults.max_packet = NV_SCI_MAX_PACKET_SYMBOLS;
    const std::string error = o.ring.check(NV_MAX_NODES);
    if (!error.empty()) usage(error);
    if (o.ucode.empty()) usage("--ucode is required");
    if (o.hot_lines * 5 >= NV_SLICE_LINES || o.words == 0 || o.words > NV_LINE_WORDS) usage("hot set does not fit");
    return o;
}

std::vector<ScriptStep> read_script(const std::string &path, int nodes) {
    std::vector<ScriptStep> steps;
    std::FILE *f = std::fopen(path.c_str(), "r");
    if (!f) usage("cannot read " + path);
    ScriptStep s;
    unsigned long addr, value;
    while (std::fscanf(f, "%d %c %li %li", &s.node, &s.op, &addr, &value) == 4) {
        if (s.node < 0 || s.node >= nodes || (s.op != 'r' && s.op != 'w' && s.op != 'f')) usage("bad step in " + path);
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
    if (!f) usage("cannot read " + path);
    unsigned long long w;
    while (std::fscanf(f, "%llx", &w) == 1) words.push_back(w);
    std::fclose(f);
    if (words.empty()) usage("no microcode words in " + path);
    return words;
}

uint32_t host_address(unsigned home, uint32_t offset) { return home * NV_SLICE_BYTES + offset; }
uint32_t line_offset(unsigned line) { return (line * 5 % NV_SLICE_LINES) * NV_LINE_BYTES; }

void write_array(std::FILE *f, const char *name, const std::vector<uint32_t> &v) {
    std::fprintf(f, ", \"%s\": [", name);
    for (size_t k = 0; k < v.size(); k++) std::fprintf(f, "%s%u", k ? ", " : "", v[k]);
    std::fprintf(f, "]");
}

class CardNode : public RingNode {
public:
    CardNode(const NodeLinks &links, const Options &opt, const std::vector<uint64_t> &ucode,
             const std::vector<ScriptStep> &script)
        : RingNode(links.node), opt_(opt), script_(script), context_(new VerilatedContext),
          model_(new Model(context_.get(), "card")), clocks_(model_.get(), nv_clocks(model_.get())), sys_(clocks_[0]),
          control_(links.control_up, links.control_down, sys_),
          traffic_(opt.ring.seed * 0x9E3779B97F4A7C15ull + uint64_t(links.node) + 1) {
        nv_bind_ports(model_.get(), &ports_);
        add_output(links.control_up);
        add_input(*links.control_down.queue, links.control_down.latency_ps);

        if (opt.access_log) {
            const std::string path = opt.ring.out_dir + "/accesses." + name() + ".log";
            if (!(log_ = std::fopen(path.c_str(), "w"))) usage("cannot write " + path);
        }
        if (!opt.trace_dir.empty())
            trace_.reset(new TraceSource(opt.trace_dir + "/" + name() + ".trace", id(), control_));
        // The hot words, as host port addresses.
        for (int home = 0; home < opt.ring.nodes; home++)
            for (unsigned line = 0; line < opt.hot_lines; line++)
                for (unsigned w = 0; w < opt.words; w++)
                    hot_.push_back(host_address(home, line_offset(line) + (4 * 7 * w) % NV_LINE_BYTES));

        regs_.reset(new BusScript(WishbonePins{ports_.regs_cyc, ports_.regs_stb, ports_.regs_we, ports_.regs_sel,
                                               ports_.regs_ack, ports_.regs_err, ports_.regs_adr, ports_.regs_dat_w,
                                               ports_.regs_dat_r},
                                  id()));
        host_.reset(new HostDriver(
            id(),
            HostPins{ports_.host_req_valid, ports_.host_req_ready, ports_.host_wdata_valid, ports_.host_wdata_ready,
                     ports_.host_resp_valid, ports_.host_resp_ready, ports_.host_req_payload, ports_.host_wdata_payload,
                     ports_.host_resp_payload},
            [this](HostOp &op, uint64_t cycle) { return next_op(op, cycle); }, log_));
        ring_tx_.reset(new RingTransmitter(ports_.tx, links.ring_out, sys_));
        ring_rx_.reset(
            new RingReceiver(ports_.rx, links.ring_in, sys_, links.ring_delay, links.ring_faults, links.ring_seed));
        sys_.add(regs_.get());
        sys_.add(host_.get());
        sys_.add(ring_rx_.get());
        sys_.add(ring_tx_.get());
        add_output(links.ring_out);
        add_input(*links.ring_in.queue, links.ring_in.latency_ps);

        // Bring-up, as the firmware does it.
        regs_->write(NV_CTRL_NODE_ID, uint32_t(id()));
        regs_->write(NV_CTRL_CTRL, NV_CTRL_CTRL_NODE_ID_VALID_MASK | (opt.numa ? NV_CTRL_CTRL_NUMA_MODE_MASK : 0) |
                                       (opt.cache_first_miss ? NV_CTRL_CTRL_CACHE_FIRST_MISS_MASK : 0));
        regs_->write(NV_RAC_UCODE_ADDR, 0);
        for (uint64_t w : ucode) {
            regs_->write(NV_RAC_UCODE_WDATA_LO, uint32_t(w));
            regs_->write(NV_RAC_UCODE_WDATA_HI, uint32_t(w >> 32));
        }
        regs_->write(NV_RAC_CTRL, NV_RAC_CTRL_LOADED_MASK | (opt.microcode_only ? NV_RAC_CTRL_MICROCODE_ONLY_MASK : 0));
        *ports_.rst = 1;
        model_->eval();
        clocks_.settled();
    }

    ~CardNode() override {
        if (log_) std::fclose(log_);
        model_->final();
    }

    uint64_t next_edge() const override { return phase_ == Phase::Stopped ? kForever : clocks_.next_rise_ps(); }
    uint64_t sys_cycle() const override { return sys_.cycle(); }

    void step() override {
        const uint64_t t = clocks_.next_rise_ps();
        control_.receive(t);
        if (control_.stop) {
            phase_ = Phase::Stopped;
            return;
        }
        act_on_hub();
        clocks_.step([&](uint64_t) { *ports_.rst = sys_.cycle() < kResetCycles; });
        advance(t);
        if (opt_.ring.max_cycles && sys_.cycle() >= opt_.ring.max_cycles) phase_ = Phase::Stopped;
    }

    void write_result(std::FILE *f) override {
        std::fprintf(f, "\"node\": %d, \"cycles\": %llu, \"traffic_start\": %llu, \"traffic_end\": %llu", id(),
                     (unsigned long long)sys_.cycle(), (unsigned long long)traffic_start_,
                     (unsigned long long)traffic_end_);
        const RingFaultCounts &rc = ring_rx_->counts();
        std::fprintf(f, ", \"ring_in\": {\"packets\": %llu, \"flips\": %llu, \"dropped\": %llu, \"duplicated\": %llu}",
                     (unsigned long long)rc.packets, (unsigned long long)rc.flips, (unsigned long long)rc.dropped,
                     (unsigned long long)rc.duplicated);
        if (trace_)
            std::fprintf(f,
                         ", \"trace\": {\"node\": %d, \"records\": %zu, \"accesses\": %llu, \"errors\": %llu, "
                         "\"finished\": %llu, \"compute\": %llu, \"memory\": %llu, \"barrier\": %llu}",
                         id(), trace_->size(), (unsigned long long)host_->completed(),
                         (unsigned long long)host_->errors(),
                         (unsigned long long)(trace_->finished_at() ? trace_->finished_at() - traffic_start_ : 0),
                         (unsigned long long)trace_->compute_cycles(), (unsigned long long)host_->memory_cycles(),
                         (unsigned long long)trace_->barrier_cycles());
        if (!latencies_.empty()) {
            std::fprintf(f, ", \"latencies\": [");
            for (size_t k = 0; k < latencies_.size(); k++)
                std::fprintf(f, "%s[%u, %u]", k ? ", " : "", latencies_[k].first, latencies_[k].second);
            std::fprintf(f, "]");
        }
        if (dump_.taken) {
            write_array(f, "dir", dump_.dir);
            write_array(f, "home", dump_.home);
            write_array(f, "tag", dump_.tag);
            write_array(f, "tag_line", dump_.tag_line);
            write_array(f, "cache", dump_.cache);
            std::fprintf(f, ", \"counters\": {");
            for (size_t k = 0; k < dump_.counters.size(); k++)
                std::fprintf(f, "%s\"%s\": %u", k ? ", " : "", kCounterRegisters[k].name, dump_.counters[k]);
            std::fprintf(f, "}");
        }
    }

private:
    static constexpr uint64_t kResetCycles = 8;
    static constexpr uint64_t kSettleCycles = 2000;   // after a step, for the ring to go quiet

    enum class Phase { BringUp, Waiting, Traffic, Draining, Step, Dumping, Dumped, Stopped };

    struct Dump {
        std::vector<uint32_t> dir, home, tag, tag_line, cache, counters;
        bool taken = false, data_queued = false;
    };

    // What the hub said at this edge.
    void act_on_hub() {
        if (control_.start) {
            control_.start = false;
            traffic_start_ = sys_.cycle();
            phase_ = Phase::Traffic;
            host_->enable();
        }
        if (!control_.steps.empty() && phase_ == Phase::Waiting) {
            step_ = control_.steps.front();
            control_.steps.pop_front();
            phase_ = Phase::Step;
            step_issued_ = false;
            step_done_at_ = 0;
            if (traffic_start_ == 0) traffic_start_ = sys_.cycle();
            host_->enable();
        }
        if (control_.dump) {
            control_.dump = false;
            phase_ = Phase::Dumping;
            queue_dump();
        }
    }

    // The host port's next access.
    Next next_op(HostOp &op, uint64_t cycle) {
        if (trace_) return (*trace_)(op, cycle);
        if (!script_.empty()) {   // scripted: the step the hub gave this node, once
            if (phase_ != Phase::Step || step_issued_ || script_[step_].op == 'f') return Next::Wait;
            const ScriptStep &s = script_[step_];
            op = {s.op == 'w', s.addr, s.value, 0};
            step_issued_ = true;
            return Next::Op;
        }
        if (issued_ >= opt_.ops) return Next::End;
        issued_++;
        op.addr = hot_[traffic_.below(uint32_t(hot_.size()))];
        op.write = traffic_.chance(opt_.write_fraction);
        op.value = op.write ? uint32_t(id() + 1) << 24 | uint32_t(++writes_) : 0;
        op.gap = traffic_.below(opt_.max_gap);
        return Next::Op;
    }

    // After the edge at `t`: move on, and tell the hub.
    void advance(uint64_t t) {
        const uint64_t cycle = sys_.cycle();
        switch (phase_) {
        case Phase::BringUp:
            if (regs_->idle()) {
                phase_ = Phase::Waiting;
                control_.send(t, kReady);
            }
            break;
        case Phase::Traffic:
            if (host_->done()) {
                // The host has its last answer, but the card may still be busy: a fill after an
                // uncached read, a victim's rollout. Done is when no transaction entry is in use.
                traffic_end_ = cycle;
                phase_ = Phase::Draining;
                regs_->poll(NV_RAC_STATUS, NV_RAC_STATUS_BUSY_CONTEXTS_MASK, 0);
            } else if (host_->waiting(cycle) > opt_.watchdog) {
                std::fprintf(stderr, "bench: node %d: %s at %#x pending for %llu cycles: deadlock?\n", id(),
                             host_->current().write ? "write" : "read", host_->current().addr,
                             (unsigned long long)host_->waiting(cycle));
                phase_ = Phase::Waiting;
                control_.send(t, kFailed, 4);
            }
            break;
        case Phase::Draining:
            if (regs_->idle()) {
                phase_ = Phase::Waiting;
                control_.send(t, kDone);
            } else if (cycle - traffic_end_ > opt_.watchdog) {
                std::fprintf(
                    stderr,
                    "bench: node %d: transactions still in progress %llu cycles after the last access: deadlock?\n",
                    id(), (unsigned long long)(cycle - traffic_end_));
                phase_ = Phase::Waiting;
                control_.send(t, kFailed, 4);
            }
            break;
        case Phase::Step: run_step(t, cycle); break;
        case Phase::Dumping:
            if (!regs_->idle()) break;
            if (!dump_.data_queued) {
                queue_cache_data();
            } else {
                dump_.taken = true;
                phase_ = Phase::Dumped;
                control_.send(t, kDumped);
            }
            break;
        default: break;
        }
    }

    // Run the step to completion, let the ring settle, then read the card's own measurement of it
    // (LAC.LAST_LATENCY).
    void run_step(uint64_t t, uint64_t cycle) {
        const ScriptStep &s = script_[step_];
        if (s.op == 'f' && !step_issued_) {
            regs_->write(NV_LAC_COMMAND, NV_LAC_COMMAND_FLUSH_MASK);
            regs_->poll(NV_LAC_STATUS, NV_LAC_STATUS_FLUSH_BUSY_MASK, 0);
            step_issued_ = true;
        }
        const bool finished = s.op == 'f' ? regs_->idle() : host_->completed() > completed_;
        if (step_issued_ && finished && !step_done_at_) {
            completed_ = host_->completed();
            step_done_at_ = cycle;
            regs_->read(NV_LAC_LAST_LATENCY, &step_latency_);
        } else if (step_done_at_ && cycle - step_done_at_ > kSettleCycles && regs_->idle()) {
            latencies_.push_back({uint32_t(step_), s.op == 'f' ? 0u : step_latency_});
            traffic_end_ = cycle;
            phase_ = Phase::Waiting;
            control_.send(t, kStepDone, uint32_t(step_));
        }
    }

    void debug_read(uint32_t what, uint32_t addr, uint32_t reg, uint32_t *out, uint32_t reg2 = 0,
                    uint32_t *out2 = nullptr) {
        regs_->write(NV_LAC_DEBUG_ADDR, addr);
        regs_->write(NV_LAC_DEBUG_CMD, what);
        regs_->poll(NV_LAC_STATUS, NV_LAC_STATUS_DEBUG_BUSY_MASK, 0);
        regs_->read(reg, out);
        if (out2) regs_->read(reg2, out2);
    }

    void queue_dump() {
        const size_t num_counters = sizeof kCounterRegisters / sizeof kCounterRegisters[0];
        Dump &d = dump_;
        d.dir.resize(opt_.hot_lines);
        d.home.resize(opt_.hot_lines * NV_LINE_WORDS);
        d.tag.resize(NV_CACHE_SETS * NV_CACHE_WAYS);
        d.tag_line.resize(NV_CACHE_SETS * NV_CACHE_WAYS);
        d.cache.assign(NV_CACHE_SETS * NV_CACHE_WAYS * NV_LINE_WORDS, 0);
        d.counters.resize(num_counters);
        for (size_t k = 0; k < num_counters; k++) regs_->read(kCounterRegisters[k].offset, &d.counters[k]);
        for (unsigned line = 0; line < opt_.hot_lines; line++) {
            const uint32_t global = uint32_t(id()) << 26 | line_offset(line);
            debug_read(0, global, NV_LAC_DEBUG_DIR, &d.dir[line]);
            for (unsigned w = 0; w < NV_LINE_WORDS; w++)
                debug_read(2, line_offset(line) / 4 + w, NV_LAC_DEBUG_DATA, &d.home[line * NV_LINE_WORDS + w]);
        }
        for (unsigned k = 0; k < NV_CACHE_SETS * NV_CACHE_WAYS; k++)
            debug_read(1, k, NV_LAC_DEBUG_TAG, &d.tag[k], NV_LAC_DEBUG_TAG_LINE, &d.tag_line[k]);
    }

    // The data of every valid cache line, once the tags are in.
    void queue_cache_data() {
        dump_.data_queued = true;
        for (unsigned k = 0; k < NV_CACHE_SETS * NV_CACHE_WAYS; k++)
            if (dump_.tag[k] & 0xF)
                for (unsigned w = 0; w < NV_LINE_WORDS; w++)
                    debug_read(3, k * NV_LINE_WORDS + w, NV_LAC_DEBUG_DATA, &dump_.cache[k * NV_LINE_WORDS + w]);
    }

    const Options &opt_;
    const std::vector<ScriptStep> &script_;
    std::unique_ptr<VerilatedContext> context_;
    std::unique_ptr<Model> model_;
    NodePorts ports_{};
    Clocks<Model, ModelInputs> clocks_;
    ClockDomain &sys_;
    NodeControl control_;
    Rng traffic_;
    std::FILE *log_ = nullptr;
    std::vector<uint32_t> hot_;
    std::unique_ptr<TraceSource> trace_;
    std::unique_ptr<BusScript> regs_;
    std::unique_ptr<HostDriver> host_;
    std::unique_ptr<RingTransmitter> ring_tx_;
    std::unique_ptr<RingReceiver> ring_rx_;
    Phase phase_ = Phase::BringUp;
    uint64_t issued_ = 0, writes_ = 0, completed_ = 0;
    uint64_t traffic_start_ = 0, traffic_end_ = 0;
    size_t step_ = 0;
    bool step_issued_ = false;
    uint64_t step_done_at_ = 0;
    uint32_t step_latency_ = 0;
    std::vector<std::pair<uint32_t, uint32_t>> latencies_;   // (step, cycles)
    Dump dump_;
};

}   // namespace

int main(int argc, char **argv) {
    const Options opt = parse(argc, argv);
    const std::vector<uint64_t> ucode = read_ucode(opt.ucode);
    const std::vector<ScriptStep> script =
        opt.script.empty() ? std::vector<ScriptStep>() : read_script(opt.script, opt.ring.nodes);
    RunPlan plan;
    plan.limit_fails = true;
    for (const ScriptStep &s : script) plan.script.push_back(s.node);
    plan.start_after_ready = script.empty();
    plan.dump_when_done = true;
    try {
        return run_ring(argc, argv, opt.ring, plan, NV_SYS_PERIOD_PS, 0, [&](const NodeLinks &links) {
            return std::unique_ptr<RingNode>(new CardNode(links, opt, ucode, script));
        });
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench: %s\n", e.what());
        return 1;
    }
}
