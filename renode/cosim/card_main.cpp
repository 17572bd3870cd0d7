// The Numavia card inside Renode: the verilated card (numavia_card_cosim.v, generated around the
// card's own Verilog) driven through protocol actions of its own (numavia_cosim.h, generated;
// RingLink.cs sends them). Renode never clocks this model by itself: the ring connector does, so
// that every card of the ring sees the same cycles and a cross-node access can complete while the
// CPU that made it waits.
//
// * STEP n: run n card cycles (fewer when asked to stop at the end of a CPU bus access).
// * CPU bus: BUS_READ/BUS_WRITE start a Wishbone cycle on the card's bus; it runs during the
//   following STEPs and BUS_RESULT takes its data once the card acknowledged it.
// * Ring link: the card drives one symbol per cycle. Each non-idle symbol is recorded with the
//   card cycle it left at (RING_TX_POP); the connector hands it to the next card with the cycle it
//   arrives at there (RING_RX_PUSH), and the card drives it on its receiver at exactly that cycle.
// * Straps: node id and mode, applied with a reset as at power-up.
// * MODEL_ID: the start of the SHA-256 of the card Verilog the model was built from.
// * VIA (when the card has it): the engine's DMA initiator reads and writes Renode's system bus
//   (host memory) through the library's Wishbone initiator, and Ethernet frames go out and come
//   in as words (ETH_TX_POP/ETH_RX_PUSH) that the connector switches between cards. The card's
//   interrupt output goes to Renode as a co-simulation interrupt (IRQ_SIGNAL), sent when its level
//   changed by the end of a step; the CPU runs only between steps, so it sees every level it can.
//
// Every piece of state lives in one Card object made by Init(); each node loads its own copy of
// this library (the ring script names one file per node), so nodes share nothing.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include <verilated.h>

#include "Vnumavia_card_cosim.h"
#include "numavia_cosim.h"
#include "src/renode_bus.h"
#if NV_CARD_HAS_VIA
#include "src/buses/wishbone-initiator.h"
#endif

namespace {

constexpr uint64_t kPresent = 1ull << NV_PRESENT_BIT;
constexpr uint64_t kSymbolMask = (1ull << NV_RING_SYMBOL_BITS) - 1;

struct Stamped {
    uint64_t cycle;
    uint32_t symbol;
};

struct Card {
    Vnumavia_card_cosim top;
    uint64_t now = 0;   // card cycles run since the ring started
    uint64_t step_end = 0;
    bool stop_at_bus_end = false;

    // Ring link.
    std::deque<Stamped> sent;         // left the card, not yet taken by the connector
    std::deque<Stamped> to_receive;   // delivered by the connector, in cycle order
    uint64_t late_symbols = 0;        // arrived after their cycle: the connector broke lockstep

    // CPU bus: one access at a time.
    bool bus_active = false, bus_ending = false, bus_done = false;
    unsigned bus_shift = 0;
    uint32_t bus_data = 0;

#if NV_CARD_HAS_VIA
    std::deque<uint64_t> eth_sent;   // words of frames the card sent
    std::deque<uint64_t> eth_to_receive;
    bool eth_rx_taken = false;
    WishboneInitiator<uint32_t, uint32_t> *dma = nullptr;
    uint8_t dma_stall = 0;   // the card's DMA port is classic Wishbone: no stall line
#endif
    uint8_t last_clk = 0;
};

Card *card;

#if NV_CARD_HAS_VIA
uint64_t eth_word(uint32_t data, unsigned bytes, bool last) {
    return data | uint64_t(bytes - 1) << NV_ETH_WORD_BYTES_SHIFT | uint64_t(last) << NV_ETH_WORD_LAST_BIT;
}
#endif

// The outputs still hold what the coming rising edge transfers.
void before_rising_edge(Card &c) {
    auto &top = c.top;
    const uint32_t tx = top.ring_tx & kSymbolMask;
    if (tx) c.sent.push_back({c.now, tx});
    // The symbol due in this cycle, sampled by the receiver at this edge: a symbol sent in cycle t
    // is received in cycle t + delay, so a window of the ring delay never needs its own symbols.
    top.ring_rx = 0;
    while (!c.to_receive.empty() && c.to_receive.front().cycle <= c.now) {
        if (c.to_receive.front().cycle < c.now) c.late_symbols++;
        top.ring_rx = c.to_receive.front().symbol;
        c.to_receive.pop_front();
    }
    if (c.bus_active && top.wb_ack) {
        c.bus_data = uint32_t(top.wb_dat_r) >> c.bus_shift;
        c.bus_ending = true;
    }
#if NV_CARD_HAS_VIA
    // A beat moves when valid and ready are high before the edge; the switch never pushes back.
    if (top.eth_tx_valid) {
        const uint64_t beat = top.eth_tx_payload;
        const bool last = (beat >> NV_ETH_BEAT_LAST_LSB) & 1;
        const unsigned last_be = (beat >> NV_ETH_BEAT_LAST_BE_LSB) & 0xf;
        unsigned bytes = 4;
        if (last)
            for (bytes = 1; bytes < 4 && !(last_be & (1u << (bytes - 1))); bytes++) {
            }
        c.eth_sent.push_back(eth_word(uint32_t(beat), bytes, last));
    }
    c.eth_rx_taken = top.eth_rx_valid && top.eth_rx_ready;
#endif
}

// Drive the inputs of the next cycle.
void after_rising_edge(Card &c) {
    auto &top = c.top;
    c.now++;
    if (c.bus_ending) {
        top.wb_cyc = top.wb_stb = top.wb_we = 0;
        top.wb_sel = 0;
        c.bus_active = c.bus_ending = false;
        c.bus_done = true;
    }
#if NV_CARD_HAS_VIA
    if (c.eth_rx_taken) c.eth_to_receive.pop_front();
    top.eth_tx_ready = 1;
    top.eth_rx_valid = !c.eth_to_receive.empty();
    if (!c.eth_to_receive.empty()) {
        const uint64_t word = c.eth_to_receive.front();
        const bool last = (word >> NV_ETH_WORD_LAST_BIT) & 1;
        const unsigned bytes = ((word >> NV_ETH_WORD_BYTES_SHIFT) & 3) + 1;
        top.eth_rx_payload = uint64_t(uint32_t(word)) << NV_ETH_BEAT_DATA_LSB | uint64_t(last) << NV_ETH_BEAT_LAST_LSB |
                             uint64_t(last ? 1u << (bytes - 1) : 0) << NV_ETH_BEAT_LAST_BE_LSB;
    }
#endif
}

void eval() {
    Card &c = *card;
    const bool rising = c.top.clk && !c.last_clk;
    if (rising) before_rising_edge(c);
    c.top.eval();
    if (rising) after_rising_edge(c);
    c.last_clk = c.top.clk;
}

bool step_over(const Card &c) { return c.now >= c.step_end || (c.stop_at_bus_end && c.bus_done); }

// Run cycles until the step is over. With VIA the DMA initiator clocks the card, so its
// per-cycle handlers serve the card's DMA requests; it is ticked one cycle at a time so that a
// step can end on the cycle a CPU access completes.
void run_step(Card &c) {
    while (!step_over(c)) {
#if NV_CARD_HAS_VIA
        c.dma->tick(false, 1);
#else
        c.top.clk = 1;
        eval();
        c.top.clk = 0;
        eval();
#endif
    }
}

void pulse_reset(Card &c) {
    c.top.rst = 1;
    for (int i = 0; i < 2; i++) {
        c.top.clk = 1;
        c.top.eval();
        c.top.clk = 0;
        c.top.eval();
    }
    c.top.rst = 0;
    c.last_clk = 0;
}

uint64_t pop(std::deque<uint64_t> &queue) {
    if (queue.empty()) return 0;
    const uint64_t value = kPresent | queue.front();
    queue.pop_front();
    return value;
}

class CardAgent : public RenodeAgent {
public:
    // The card is reset by its straps (SET_STRAPS), not by Renode's generic reset, which would
    // clock the model outside the ring's lockstep.
    void reset() override {}

    void handleCustomRequestType(Protocol *message) override {
        Card &c = *card;
        switch (message->actionId) {
        case NV_ACTION_STEP: {
            const uint64_t start = c.now;
            // Renode's connection reads with an address and no value: the step's cycles and flags
            // come in the address field.
            c.step_end = c.now + (message->addr & 0xffffffffull);
            c.stop_at_bus_end = (message->addr >> NV_STEP_STOP_AT_BUS_END_BIT) & 1;
            run_step(c);
#if NV_CARD_HAS_VIA
            handleInterrupts();
#endif
            uint64_t answer = (c.now - start) | uint64_t(c.sent.size()) << NV_STEP_SENT_SHIFT;
            if (c.bus_done) answer |= 1ull << NV_STEP_BUS_DONE_BIT;
            if (c.late_symbols) answer |= 1ull << NV_STEP_LATE_BIT;
#if NV_CARD_HAS_VIA
            if (!c.eth_sent.empty()) answer |= 1ull << NV_STEP_ETH_SENT_BIT;
#endif
            reply(message->actionId, answer);
            break;
        }
        case NV_ACTION_MODEL_ID: reply(message->actionId, NUMAVIA_CARD_MODEL_ID); break;
        case NV_ACTION_SET_CYCLE:
            c.now = message->value;
            reply(ok, 0);
            break;
        case NV_ACTION_RING_TX_POP:
            if (c.sent.empty()) {
                reply(message->actionId, 0);
            } else {
                const Stamped s = c.sent.front();
                c.sent.pop_front();
                reply(message->actionId, kPresent | s.cycle << NV_RING_SYMBOL_BITS | s.symbol);
            }
            break;
        case NV_ACTION_RING_RX_PUSH:
            c.to_receive.push_back({message->value >> NV_RING_SYMBOL_BITS, uint32_t(message->value & kSymbolMask)});
            reply(ok, 0);
            break;
        case NV_ACTION_SET_STRAPS:
            c.top.node_id_strap = message->value & 0xff;
            c.top.mode_strap = (message->value >> 8) & 0xff;
            c.sent.clear();
            c.to_receive.clear();
            pulse_reset(c);
            reply(ok, 0);
            break;
        case NV_ACTION_BUS_READ:
        case NV_ACTION_BUS_WRITE: {
            if (c.bus_active) {
                log(LOG_LEVEL_ERROR, "a CPU access started while another one was in flight");
                reply(error, 0);
                break;
            }
            const unsigned bytes = (message->value >> NV_BUS_WIDTH_SHIFT) & 0xf;
            c.bus_shift = 8 * (message->addr & 3);
            c.top.wb_adr = message->addr >> 2;
            c.top.wb_sel = ((1u << bytes) - 1) << (message->addr & 3);
            c.top.wb_we = message->actionId == NV_ACTION_BUS_WRITE;
            c.top.wb_dat_w = uint32_t(message->value) << c.bus_shift;
            c.top.wb_cyc = c.top.wb_stb = 1;
            c.bus_active = true;
            c.bus_done = false;
            reply(ok, 0);
            break;
        }
        case NV_ACTION_BUS_RESULT:
            reply(message->actionId, c.bus_done ? kPresent | c.bus_data : 0);
            c.bus_done = false;
            break;
#if NV_CARD_HAS_VIA
        case NV_ACTION_ETH_TX_POP: reply(message->actionId, pop(c.eth_sent)); break;
        case NV_ACTION_ETH_RX_PUSH:
            c.eth_to_receive.push_back(message->value);
            reply(ok, 0);
            break;
#endif
        default: RenodeAgent::handleCustomRequestType(message);
        }
    }

private:
    void reply(int action, uint64_t value) { communicationChannel->sendMain(Protocol(action, 0, value)); }
};

}   // namespace

RenodeAgent *Init() {
    card = new Card;
    auto &top = card->top;
    top.rst = 0;
    top.clk = 0;
    top.wb_cyc = top.wb_stb = top.wb_we = 0;
    auto *agent = new CardAgent;
    agent->connectNative();   // the model runs inside Renode's process
#if NV_CARD_HAS_VIA
    auto *dma = new WishboneInitiator<uint32_t, uint32_t>();
    dma->wb_clk = &top.clk;
    dma->wb_rst = &top.rst;
    dma->wb_addr = &top.dma_adr;
    dma->wb_rd_dat = &top.dma_dat_r;
    dma->wb_wr_dat = &top.dma_dat_w;
    dma->wb_we = &top.dma_we;
    dma->wb_sel = &top.dma_sel;
    dma->wb_stb = &top.dma_stb;
    dma->wb_ack = &top.dma_ack;
    dma->wb_cyc = &top.dma_cyc;
    dma->wb_stall = &card->dma_stall;
    dma->evaluateModel = &eval;
    card->dma = dma;
    agent->addBus(dma);
    agent->registerInterrupt(&top.irq, NV_IRQ_SIGNAL);
#endif
    pulse_reset(*card);
    return agent;
}
