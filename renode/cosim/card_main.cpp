// The Numavia card inside Renode: the verilated card (numavia_card_cosim.v, generated around the
// card's own Verilog) behind the integration library's Wishbone bus, plus what Renode reaches
// through extra protocol actions (numavia_cosim.h, generated; RingLink.cs sends them):
//
// * Ring link: the card drives one symbol per clock cycle. Symbols of a packet (frame bit set),
//   and the first idle symbol after one (so back-to-back packets stay apart), are queued as they
//   leave; at each quantum boundary RingLink.cs moves the queue to the next node, whose card is
//   fed one queued symbol per cycle and idle symbols when the queue is empty.
// * Straps: node id and mode, applied with a reset as at power-up.
// * VIA (when the card has it): the engine's DMA initiator reads and writes Renode's system bus
//   (host memory) through the library's Wishbone initiator, and its Ethernet frames are queued
//   word by word for RingLink.cs, which hands them to Renode's switch and back.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include <verilated.h>

#include "Vnumavia_card_cosim.h"
#include "numavia_cosim.h"
#include "src/buses/wishbone.h"
#include "src/renode_bus.h"
#if NV_CARD_HAS_VIA
#include "src/buses/wishbone-initiator.h"
#endif

namespace {

constexpr uint64_t kPresent = 1ull << NV_PRESENT_BIT;
constexpr uint32_t kFrameMask = 1u << NV_RING_FRAME_BIT;

Vnumavia_card_cosim *top = new Vnumavia_card_cosim;

struct RingPort {
    std::deque<uint64_t> sent;        // left the card, not yet taken by the connector
    std::deque<uint32_t> to_receive;  // delivered by the connector, not yet fed to the card
    bool in_packet = false;

    void before_rising_edge() {
        const uint32_t tx = top->ring_tx;
        const bool frame = tx & kFrameMask;
        if (frame || in_packet)
            sent.push_back(tx);
        in_packet = frame;
    }

    void after_rising_edge() {
        top->ring_rx = 0;
        if (!to_receive.empty()) {
            top->ring_rx = to_receive.front();
            to_receive.pop_front();
        }
    }
} ring;

#if NV_CARD_HAS_VIA
// Frames as words: data in bits 31:0 (first byte lowest), valid bytes - 1, last-of-frame bit.
uint64_t eth_word(uint32_t data, unsigned bytes, bool last) {
    return data | uint64_t(bytes - 1) << NV_ETH_WORD_BYTES_SHIFT | uint64_t(last) << NV_ETH_WORD_LAST_BIT;
}

struct EthPort {
    std::deque<uint64_t> sent;        // words of frames the card sent
    std::deque<uint64_t> to_receive;  // words of frames for the card
    bool rx_taken = false;

    // A beat moves at a rising edge when valid and ready were high before it. The MAC core and
    // the switch never push back in Renode, so the card's transmitter is always ready.
    void before_rising_edge() {
        if (top->eth_tx_valid) {
            const uint64_t beat = top->eth_tx_payload;
            const bool last = (beat >> NV_ETH_BEAT_LAST_LSB) & 1;
            const unsigned last_be = (beat >> NV_ETH_BEAT_LAST_BE_LSB) & 0xf;
            unsigned bytes = 4;
            if (last)
                for (bytes = 1; bytes < 4 && !(last_be & (1u << (bytes - 1))); bytes++) {}
            sent.push_back(eth_word(uint32_t(beat), bytes, last));
        }
        rx_taken = top->eth_rx_valid && top->eth_rx_ready;
    }

    void after_rising_edge() {
        if (rx_taken)
            to_receive.pop_front();
        top->eth_tx_ready = 1;
        top->eth_rx_valid = !to_receive.empty();
        if (to_receive.empty())
            return;
        const uint64_t word = to_receive.front();
        const bool last = (word >> NV_ETH_WORD_LAST_BIT) & 1;
        const unsigned bytes = ((word >> NV_ETH_WORD_BYTES_SHIFT) & 3) + 1;
        top->eth_rx_payload = uint64_t(uint32_t(word)) << NV_ETH_BEAT_DATA_LSB
                            | uint64_t(last) << NV_ETH_BEAT_LAST_LSB
                            | uint64_t(last ? 1u << (bytes - 1) : 0) << NV_ETH_BEAT_LAST_BE_LSB;
    }
} eth;
#endif

uint8_t last_clk = 0;

void eval() {
    const bool rising = top->clk && !last_clk;
    if (rising) {       // the outputs still hold what the coming edge transfers
        ring.before_rising_edge();
#if NV_CARD_HAS_VIA
        eth.before_rising_edge();
#endif
    }
    top->eval();
    if (rising) {       // drive the inputs of the next cycle
        ring.after_rising_edge();
#if NV_CARD_HAS_VIA
        eth.after_rising_edge();
#endif
    }
    last_clk = top->clk;
}

uint64_t pop(std::deque<uint64_t> &queue) {
    if (queue.empty())
        return 0;
    const uint64_t value = kPresent | queue.front();
    queue.pop_front();
    return value;
}

Wishbone *cpu_bus;
#if NV_CARD_HAS_VIA
WishboneInitiator<uint32_t, uint32_t> *dma_bus;
uint8_t dma_stall;   // the card's DMA port is classic Wishbone: the initiator's stall goes nowhere
#endif

class CardAgent : public RenodeAgent {
public:
    using RenodeAgent::RenodeAgent;

    // Both buses share the card's clock: one of them toggles it. With VIA it is the DMA initiator,
    // whose per-cycle handlers serve the card's requests (the CPU bus clocks the model itself only
    // while it waits for an access to the card).
    void tick(bool countEnable, uint64_t steps) override {
#if NV_CARD_HAS_VIA
        dma_bus->tick(countEnable, steps);
#else
        cpu_bus->tick(countEnable, steps);
#endif
    }

    void handleCustomRequestType(Protocol *message) override {
        switch (message->actionId) {
        case NV_ACTION_RING_TX_POP:
            answer(message->actionId, pop(ring.sent));
            break;
        case NV_ACTION_RING_RX_PUSH:
            ring.to_receive.push_back(uint32_t(message->value));
            answer(ok, 0);
            break;
        case NV_ACTION_SET_STRAPS:
            top->node_id_strap = message->value & 0xff;
            top->mode_strap = (message->value >> 8) & 0xff;
            ring = RingPort();
            reset();
            answer(ok, 0);
            break;
#if NV_CARD_HAS_VIA
        case NV_ACTION_ETH_TX_POP:
            answer(message->actionId, pop(eth.sent));
            break;
        case NV_ACTION_ETH_RX_PUSH:
            eth.to_receive.push_back(message->value);
            answer(ok, 0);
            break;
#endif
        default:
            RenodeAgent::handleCustomRequestType(message);
        }
    }

private:
    void answer(int action, uint64_t value) {
        communicationChannel->sendMain(Protocol(action, 0, value));
    }
};

}  // namespace

RenodeAgent *Init() {
    cpu_bus = new Wishbone();
    cpu_bus->wb_clk = &top->clk;
    cpu_bus->wb_rst = &top->rst;
    cpu_bus->wb_addr = &top->wb_adr;
    cpu_bus->wb_rd_dat = &top->wb_dat_r;
    cpu_bus->wb_wr_dat = &top->wb_dat_w;
    cpu_bus->wb_we = &top->wb_we;
    cpu_bus->wb_sel = &top->wb_sel;
    cpu_bus->wb_stb = &top->wb_stb;
    cpu_bus->wb_ack = &top->wb_ack;
    cpu_bus->wb_cyc = &top->wb_cyc;
    cpu_bus->wb_stall = nullptr;
    cpu_bus->granularity = 4;     // 32-bit accesses only (the .repl's maxWidth)
    cpu_bus->addr_lines = 30;     // word addresses: the library shifts the byte address right by 2
    cpu_bus->evaluateModel = &eval;
    auto *agent = new CardAgent(cpu_bus);
#if NV_CARD_HAS_VIA
    dma_bus = new WishboneInitiator<uint32_t, uint32_t>();
    dma_bus->wb_clk = &top->clk;
    dma_bus->wb_rst = &top->rst;
    dma_bus->wb_addr = &top->dma_adr;
    dma_bus->wb_rd_dat = &top->dma_dat_r;
    dma_bus->wb_wr_dat = &top->dma_dat_w;
    dma_bus->wb_we = &top->dma_we;
    dma_bus->wb_sel = &top->dma_sel;
    dma_bus->wb_stb = &top->dma_stb;
    dma_bus->wb_ack = &top->dma_ack;
    dma_bus->wb_cyc = &top->dma_cyc;
    dma_bus->wb_stall = &dma_stall;
    dma_bus->evaluateModel = &eval;
    agent->addBus(dma_bus);
#endif
    return agent;
}

#ifdef NUMAVIA_COSIM_SOCKET_MAIN
int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s RECEIVER_PORT SENDER_PORT [ADDRESS]\n", argv[0]);
        return 2;
    }
    Verilated::commandArgs(argc, argv);
    RenodeAgent *agent = Init();
    agent->simulate(atoi(argv[1]), atoi(argv[2]), argc > 3 ? argv[3] : "127.0.0.1");
    top->final();
    return 0;
}
#endif
