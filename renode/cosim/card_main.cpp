// The Numavia card inside Renode: the verilated card behind the integration library's Wishbone
// bus, plus the ring link and the straps, which Renode reaches through extra protocol actions
// (numavia_cosim.h, generated; RingLink.cs sends them).
//
// Ring link: the card drives one symbol per clock cycle. Symbols of a packet (frame bit set),
// and the first idle symbol after one (so back-to-back packets stay apart), are queued as they
// leave; at each quantum boundary RingLink.cs moves the queue to the next node, whose card is fed
// one queued symbol per cycle and idle symbols when the queue is empty.
#include <cstdint>
#include <cstdlib>
#include <deque>

#include <verilated.h>

#include "Vnumavia_card_cosim.h"
#include "numavia_cosim.h"
#include "src/buses/wishbone.h"
#include "src/renode_bus.h"

namespace {

constexpr uint32_t kFrameMask = 1u << NV_RING_FRAME_BIT;
constexpr uint64_t kSymbolPresent = 1ull << NV_SYMBOL_PRESENT_BIT;

Vnumavia_card_cosim *top = new Vnumavia_card_cosim;

struct RingPort {
    std::deque<uint32_t> sent;        // left the card, not yet taken by the connector
    std::deque<uint32_t> to_receive;  // delivered by the connector, not yet fed to the card
    bool in_packet = false;

    // Once per clock cycle, after the rising edge.
    void cycle() {
        const uint32_t tx = top->ring_tx;
        const bool frame = tx & kFrameMask;
        if (frame || in_packet)
            sent.push_back(tx);
        in_packet = frame;
        if (to_receive.empty()) {
            top->ring_rx = 0;
        } else {
            top->ring_rx = to_receive.front();
            to_receive.pop_front();
        }
    }
} ring;

uint8_t last_clk = 0;

void eval() {
    top->eval();
    if (top->clk && !last_clk)
        ring.cycle();
    last_clk = top->clk;
}

class CardAgent : public RenodeAgent {
public:
    using RenodeAgent::RenodeAgent;

    void handleCustomRequestType(Protocol *message) override {
        switch (message->actionId) {
        case NV_ACTION_RING_TX_POP: {
            uint64_t answer = 0;
            if (!ring.sent.empty()) {
                answer = kSymbolPresent | ring.sent.front();
                ring.sent.pop_front();
            }
            communicationChannel->sendMain(Protocol(NV_ACTION_RING_TX_POP, 0, answer));
            break;
        }
        case NV_ACTION_RING_RX_PUSH:
            ring.to_receive.push_back(static_cast<uint32_t>(message->value));
            communicationChannel->sendMain(Protocol(ok, 0, 0));
            break;
        case NV_ACTION_SET_STRAPS:
            // Straps are sampled at reset on a board: apply them, then reset the card.
            top->node_id_strap = message->value & 0xff;
            top->mode_strap = (message->value >> 8) & 0xff;
            ring = RingPort();
            reset();
            communicationChannel->sendMain(Protocol(ok, 0, 0));
            break;
        default:
            RenodeAgent::handleCustomRequestType(message);
        }
    }
};

}  // namespace

RenodeAgent *Init() {
    auto *bus = new Wishbone();
    bus->wb_clk = &top->clk;
    bus->wb_rst = &top->rst;
    bus->wb_addr = &top->wb_adr;
    bus->wb_rd_dat = &top->wb_dat_r;
    bus->wb_wr_dat = &top->wb_dat_w;
    bus->wb_we = &top->wb_we;
    bus->wb_sel = &top->wb_sel;
    bus->wb_stb = &top->wb_stb;
    bus->wb_ack = &top->wb_ack;
    bus->wb_cyc = &top->wb_cyc;
    bus->wb_stall = nullptr;
    bus->granularity = 4;     // 32-bit accesses only (the .repl's maxWidth)
    bus->addr_lines = 30;     // word addresses: the library shifts the byte address right by 2
    bus->evaluateModel = &eval;
    return new CardAgent(bus);
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
