//
// Numavia ring for Renode: the co-simulated cards of a ring's machines, clocked together.
//
// Loaded by the ring script (`include $ORIGIN/RingLink.cs`). It defines:
//  * NumaviaCard, a bus peripheral whose registers and shared window are the card's Verilog in
//    Verilator (libVnumavia_card.so, renode/cosim/card_main.cpp), reached through Renode's
//    co-simulation connection and protocol actions of the card model's own; its interrupt output
//    comes back as a co-simulation interrupt and drives the IRQ line (the platform wires it);
//  * NumaviaRing, the external that clocks every card of the ring in lockstep and carries the
//    ring link's symbols and the VIA engine's Ethernet frames between them.
//
// Why the ring clocks the cards: a CPU access that misses in the network cache waits for other
// cards to answer over the ring. Renode runs one machine at a time and a bus access takes no
// virtual time, so the cards of the other machines must run while the access is in flight. The
// ring therefore owns the card clock: it runs all cards together in windows of at most one link
// delay (a symbol sent at cycle t reaches the next card at cycle t + delay, so no window needs a
// symbol from itself), at every quantum boundary up to the emulation's virtual time, and during
// every CPU access until the card acknowledges it. The card clock runs ahead of virtual time by
// the cycles accesses took; the next boundaries catch up. Everything happens in one order
// (node ids, access order), so runs are deterministic.
//
using System;
using System.Collections.Generic;
using System.Linq;

using Antmicro.Renode.Core;
using Antmicro.Renode.Exceptions;
using Antmicro.Renode.Logging;
using Antmicro.Renode.Peripherals.Bus;
using Antmicro.Renode.Peripherals.CoSimulated;
using Antmicro.Renode.Plugins.CoSimulationPlugin.Connection;
using Antmicro.Renode.Plugins.CoSimulationPlugin.Connection.Protocols;
using Antmicro.Renode.Time;
using Antmicro.Renode.Tools.Network;

namespace Antmicro.Renode.Peripherals.CoSimulated
{
    public class NumaviaCard : ICoSimulationConnectible, IBytePeripheral, IWordPeripheral, IDoubleWordPeripheral,
                               IBusPeripheral, IAbsoluteAddressAware, IDisposable
    {
        public NumaviaCard(IMachine machine, ulong frequency = 100000000, int timeout = 60000)
        {
            Frequency = frequency;
            // Frequency 0: Renode never clocks the model on its own; the ring does (see above).
            connection = new CoSimulationConnection(machine, "numavia_card_connection", 0, 0, timeout, timeout,
                                                    null, 0, 0);
            connection.AttachTo(this);
        }

        // The card model, a shared library. Each node must load a file of its own: the dynamic
        // loader gives a second load of the same file the first one's state.
        public string SimulationFilePathLinux
        {
            get => connection.SimulationFilePathLinux;
            set
            {
                if(!System.IO.File.Exists(value))
                {
                    throw new RecoverableException($"card model {value} does not exist: build it (numavia renode --run "
                                                   + "does, or cmake --build OUT/cosim/build)");
                }
                connection.SimulationFilePathLinux = value;
            }
        }

        // The start of the SHA-256 of the card Verilog the ring script was generated for: a model
        // built from other Verilog is a different card.
        public void ExpectModel(string id)
        {
            var built = connection.Read(this, (ActionType)ModelIdAction, 0).ToString("x16");
            if(built != id)
            {
                throw new RecoverableException($"card model {SimulationFilePathLinux} was built from other card Verilog "
                                               + $"({built}, the ring expects {id}): run numavia renode again and rebuild it");
            }
        }

        // The card's node-id strap; setting it resets the card, as a strap change at power-up would.
        public int NodeId
        {
            get => nodeId;
            set
            {
                if(value < 0 || value > MaxNodeId)
                {
                    throw new RecoverableException($"node id {value} is outside 0..{MaxNodeId}");
                }
                nodeId = value;
                ApplyStraps();
            }
        }

        // The board switches (MODE_STRAP); bit 0 selects NUMA mode.
        public byte ModeStrap
        {
            get => modeStrap;
            set
            {
                modeStrap = value;
                ApplyStraps();
            }
        }

        // The VIA engine's MAC address ("02:4e:56:00:00:01"); the ring delivers frames by it.
        public string MacAddress
        {
            get => string.Join(":", Mac.Select(b => b.ToString("x2")));
            set
            {
                var parts = value.Split(':');
                if(parts.Length != 6)
                {
                    throw new RecoverableException($"MAC address {value} is not six bytes");
                }
                Mac = parts.Select(p => Convert.ToByte(p, 16)).ToArray();
            }
        }

        public byte[] Mac { get; private set; } = new byte[6];

        public ulong Frequency { get; }

        public NumaviaRing Ring { get; set; }

        // The card's interrupt to the node's CPU (the VIA engine's mailbox and management frames).
        public GPIO IRQ { get; } = new GPIO();

        public int RenodeToCosimIndex => 0;

        public int CosimToRenodeIndex => 0;

        public void OnConnectionAttached(CoSimulationConnection connection)
        {
            this.connection = connection;
            connection.RegisterOnGPIOReceive(OnCardInterrupt, InterruptSignals);
        }

        public void OnConnectionDetached(CoSimulationConnection connection)
        {
            connection.UnregisterOnGPIOReceive(InterruptSignals);
            this.connection = null;
        }

        public void SetAbsoluteAddress(ulong address)
        {
            absoluteAddress = address;
        }

        public void Reset()
        {
            // The card resets with its straps (NodeId), as at power-up; a machine reset leaves it be.
        }

        public void Dispose()
        {
            Ring?.DetachFrom(this);
            connection?.DetachFrom(this);
        }

        public byte ReadByte(long offset) => (byte)Access(1, false, 0);
        public ushort ReadWord(long offset) => (ushort)Access(2, false, 0);
        public uint ReadDoubleWord(long offset) => Access(4, false, 0);
        public void WriteByte(long offset, byte value) => Access(1, true, value);
        public void WriteWord(long offset, ushort value) => Access(2, true, value);
        public void WriteDoubleWord(long offset, uint value) => Access(4, true, value);

        // Run the card `cycles` cycles, or until the CPU access in flight completes.
        public StepResult Step(ulong cycles, bool stopAtBusEnd = false)
        {
            // A read carries no value: the cycles and flags go in the address field.
            var answer = connection.Read(this, (ActionType)StepAction,
                                         (long)(cycles | (stopAtBusEnd ? 1UL << StepStopAtBusEndBit : 0)));
            if((answer & (1UL << StepLateBit)) != 0 && !reportedLate)
            {
                this.Log(LogLevel.Error, "ring symbols reached the card after their cycle: the ring left lockstep");
                reportedLate = true;
            }
            return new StepResult
            {
                Cycles = answer & 0xFFFFFFFF,
                Sent = (int)((answer >> StepSentShift) & 0xFFFF),
                BusDone = (answer & (1UL << StepBusDoneBit)) != 0,
                EthernetSent = (answer & (1UL << StepEthSentBit)) != 0,
            };
        }

        public void SetCycle(ulong cycle)
        {
            connection.Write(this, (ActionType)SetCycleAction, 0, cycle);
        }

        // The next `count` symbols the card sent, with the cycle each left at.
        public List<ulong> TakeSentSymbols(int count)
        {
            var symbols = new List<ulong>(count);
            for(var i = 0; i < count; i++)
            {
                symbols.Add(connection.Read(this, (ActionType)RingTxPopAction, 0) & ~(1UL << PresentBit));
            }
            return symbols;
        }

        // A symbol for the card's receiver, with the cycle it must arrive at.
        public void ReceiveSymbol(ulong cycle, ulong symbol)
        {
            connection.Write(this, (ActionType)RingRxPushAction, 0, (cycle << RingSymbolBits) | symbol);
        }

        // Words of frames the card sent (see numavia.renode.cosim for their format).
        public List<ulong> TakeFrameWords()
        {
            var words = new List<ulong>();
            while(true)
            {
                var answer = connection.Read(this, (ActionType)EthTxPopAction, 0);
                if((answer & (1UL << PresentBit)) == 0)
                {
                    return words;
                }
                words.Add(answer & ~(1UL << PresentBit));
            }
        }

        public void ReceiveFrameWords(IEnumerable<ulong> words)
        {
            foreach(var word in words)
            {
                connection.Write(this, (ActionType)EthRxPushAction, 0, word);
            }
        }

        public bool IsLoaded => connection != null && connection.IsConnected;

        // Same numbers as numavia.renode.cosim (a test compares them).
        public const int StepAction = 200;
        public const int SetCycleAction = 201;
        public const int RingTxPopAction = 202;
        public const int RingRxPushAction = 203;
        public const int SetStrapsAction = 204;
        public const int BusReadAction = 205;
        public const int BusWriteAction = 206;
        public const int BusResultAction = 207;
        public const int EthTxPopAction = 208;
        public const int EthRxPushAction = 209;
        public const int ModelIdAction = 210;
        public const int PresentBit = 63;
        public const int RingSymbolBits = 17;
        public const int StepStopAtBusEndBit = 32;
        public const int StepSentShift = 32;
        public const int StepLateBit = 60;
        public const int StepEthSentBit = 61;
        public const int StepBusDoneBit = 62;
        public const int BusWidthShift = 32;
        public const int IrqSignal = 0;
        public const int MaxNodeId = 63;

        public struct StepResult
        {
            public ulong Cycles;
            public int Sent;
            public bool BusDone;
            public bool EthernetSent;
        }

        private uint Access(int width, bool write, uint value)
        {
            var address = absoluteAddress;
            if(!IsLoaded)
            {
                this.Log(LogLevel.Error, "{0} of 0x{1:X} before the card model was loaded (SimulationFilePathLinux)",
                         write ? "write" : "read", address);
                return 0;
            }
            if(Ring == null)
            {
                throw new RecoverableException("the card is in no ring: connect it (connector Connect sysbus.card ring)");
            }
            return Ring.Access(this, address, width, write, value);
        }

        internal uint RunAccess(ulong address, int width, bool write, uint value, Func<bool> advance)
        {
            connection.Write(this, (ActionType)(write ? BusWriteAction : BusReadAction), (long)address,
                             value | ((ulong)width << BusWidthShift));
            while(!advance())
            {
            }
            var result = connection.Read(this, (ActionType)BusResultAction, 0);
            return (uint)result;
        }

        // The model sends the card's interrupt level when it changed, at the end of a step (Renode's
        // co-simulation interrupt, on the thread that ran the step: a CPU's access or a quantum
        // boundary); a CPU waiting in wfi takes it when it runs next.
        private void OnCardInterrupt(int signal, bool level)
        {
            IRQ.Set(level);
        }

        private static readonly Antmicro.Renode.Core.Range InterruptSignals = new Antmicro.Renode.Core.Range((ulong)IrqSignal, 1);

        private void ApplyStraps()
        {
            if(!IsLoaded)
            {
                throw new RecoverableException("set SimulationFilePathLinux (the card model) before the straps");
            }
            connection.Write(this, (ActionType)SetStrapsAction, 0, (ulong)nodeId | ((ulong)modeStrap << 8));
        }

        private CoSimulationConnection connection;
        private ulong absoluteAddress;
        private int nodeId;
        private byte modeStrap;
        private bool reportedLate;
    }
}

namespace Antmicro.Renode.Tools.Network
{
    public static class NumaviaRingExtensions
    {
        public static void CreateNumaviaRing(this Emulation emulation, string name, int linkDelay)
        {
            emulation.ExternalsManager.AddExternal(new NumaviaRing(linkDelay), name);
        }
    }

    public class NumaviaRing : IExternal, IConnectable<NumaviaCard>, IDisposable
    {
        public NumaviaRing(int linkDelay)
        {
            if(linkDelay < 1)
            {
                throw new RecoverableException($"the ring's link delay must be at least one cycle, not {linkDelay}");
            }
            LinkDelay = (ulong)linkDelay;
        }

        public void AttachTo(NumaviaCard card)
        {
            lock(sync)
            {
                if(!card.IsLoaded)
                {
                    throw new RecoverableException("load the card model (SimulationFilePathLinux) before connecting the card");
                }
                if(cards.Any(c => c.NodeId == card.NodeId))
                {
                    throw new RecoverableException($"a card with node id {card.NodeId} is already in the ring");
                }
                card.SetCycle(Cycle);
                card.Ring = this;
                cards.Add(card);
                cards.Sort((a, b) => a.NodeId.CompareTo(b.NodeId));
                partialFrames[card] = new List<byte>();
                if(!hooked)
                {
                    EmulationManager.Instance.CurrentEmulation.MasterTimeSource.SinksReportedHook += CatchUp;
                    hooked = true;
                }
            }
        }

        public void DetachFrom(NumaviaCard card)
        {
            lock(sync)
            {
                cards.Remove(card);
                partialFrames.Remove(card);
                card.Ring = null;
            }
        }

        public void Dispose()
        {
            if(hooked)
            {
                EmulationManager.Instance.CurrentEmulation.MasterTimeSource.SinksReportedHook -= CatchUp;
                hooked = false;
            }
        }

        // Card cycles the ring has run (every card has run exactly these).
        public ulong Cycle { get; private set; }

        public ulong LinkDelay { get; }

        // Card cycles that CPU accesses ran ahead of the emulation's virtual time.
        public ulong AccessCycles { get; private set; }

        public ulong FramesDropped { get; private set; }

        // A CPU access to `card`: start it, then run the whole ring until the card acknowledges it.
        internal uint Access(NumaviaCard card, ulong address, int width, bool write, uint value)
        {
            lock(sync)
            {
                ulong ran = 0;
                return card.RunAccess(address, width, write, value, () =>
                {
                    var step = RunWindow(LinkDelay, card);
                    ran += step.Cycles;
                    AccessCycles += step.Cycles;
                    if(!step.BusDone && ran >= AccessLimitCycles)
                    {
                        throw new RecoverableException($"node {card.NodeId}: the card did not answer the access to 0x{address:X} "
                                                       + $"in {AccessLimitCycles} cycles");
                    }
                    return step.BusDone;
                });
            }
        }

        // At every quantum boundary: run the cards up to the emulation's virtual time.
        private void CatchUp()
        {
            lock(sync)
            {
                if(cards.Count == 0)
                {
                    return;
                }
                var elapsed = EmulationManager.Instance.CurrentEmulation.MasterTimeSource.ElapsedVirtualTime;
                var target = (ulong)((decimal)elapsed.Ticks * cards[0].Frequency / TimeInterval.TicksPerSecond);
                while(Cycle < target)
                {
                    RunWindow(Math.Min(LinkDelay, target - Cycle), null);
                }
            }
        }

        // One window of the lockstep: every card runs the same cycles (the accessing card first, and
        // only until its access completes), then each card's symbols go to the next card by node id
        // (the last card's to the first: a ring of one loops back to itself) and frames to the card
        // that owns their destination MAC.
        private NumaviaCard.StepResult RunWindow(ulong cycles, NumaviaCard accessing)
        {
            var results = new Dictionary<NumaviaCard, NumaviaCard.StepResult>();
            NumaviaCard.StepResult first = default(NumaviaCard.StepResult);
            if(accessing != null)
            {
                first = accessing.Step(cycles, stopAtBusEnd: true);
                cycles = first.Cycles;
                results[accessing] = first;
            }
            foreach(var card in cards.Where(c => c != accessing))
            {
                results[card] = card.Step(cycles);
            }
            var windowStart = Cycle;
            Cycle += cycles;
            for(var i = 0; i < cards.Count; i++)
            {
                var next = cards[(i + 1) % cards.Count];
                foreach(var stamped in cards[i].TakeSentSymbols(results[cards[i]].Sent))
                {
                    var sentAt = stamped >> NumaviaCard.RingSymbolBits;
                    next.ReceiveSymbol(sentAt + LinkDelay, stamped & ((1UL << NumaviaCard.RingSymbolBits) - 1));
                }
            }
            foreach(var card in cards.Where(c => results[c].EthernetSent))
            {
                SwitchFrames(card);
            }
            return accessing != null ? first : default(NumaviaCard.StepResult);
        }

        private void SwitchFrames(NumaviaCard source)
        {
            var bytes = partialFrames[source];
            foreach(var word in source.TakeFrameWords())
            {
                var count = (int)((word >> EthWordBytesShift) & 3) + 1;
                for(var i = 0; i < count; i++)
                {
                    bytes.Add((byte)(word >> (8 * i)));
                }
                if((word & (1UL << EthWordLastBit)) == 0)
                {
                    continue;
                }
                // The LiteEth MAC core pads short frames before the FCS, so receivers see them padded.
                while(bytes.Count < MinimumFrameBytes)
                {
                    bytes.Add(0);
                }
                var destination = bytes.Take(6).ToArray();
                var broadcast = (destination[0] & 1) != 0;
                var targets = cards.Where(c => c != source && (broadcast || c.Mac.SequenceEqual(destination))).ToList();
                if(targets.Count == 0)
                {
                    FramesDropped++;
                }
                foreach(var target in targets)
                {
                    target.ReceiveFrameWords(FrameWords(bytes));
                }
                bytes.Clear();
            }
        }

        private static IEnumerable<ulong> FrameWords(List<byte> bytes)
        {
            for(var at = 0; at < bytes.Count; at += 4)
            {
                var count = Math.Min(4, bytes.Count - at);
                ulong word = 0;
                for(var i = 0; i < count; i++)
                {
                    word |= (ulong)bytes[at + i] << (8 * i);
                }
                word |= (ulong)(count - 1) << EthWordBytesShift;
                if(at + count == bytes.Count)
                {
                    word |= 1UL << EthWordLastBit;
                }
                yield return word;
            }
        }

        // Same numbers as numavia.renode.cosim (a test compares them).
        public const int EthWordBytesShift = 32;
        public const int EthWordLastBit = 34;
        public const int MinimumFrameBytes = 60;
        // Longer than any access the card can take, even behind retries: beyond it the card is stuck.
        public const ulong AccessLimitCycles = 10000000;

        private readonly List<NumaviaCard> cards = new List<NumaviaCard>();
        private readonly Dictionary<NumaviaCard, List<byte>> partialFrames = new Dictionary<NumaviaCard, List<byte>>();
        private readonly object sync = new object();
        private bool hooked;
    }
}
