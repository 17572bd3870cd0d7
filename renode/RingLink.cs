//
// Numavia ring link for Renode: joins the co-simulated cards of a ring's machines.
//
// Loaded by the ring script (`include @RingLink.cs`). It defines:
//  * NumaviaCard, Renode's CoSimulatedPeripheral plus the card's straps, its ring link and, with
//    the VIA engine, its Ethernet port (an IMACInterface, so Renode's switch connects it), reached
//    through protocol actions the card model (renode/cosim/card_main.cpp) adds;
//  * NumaviaRing, an external that, at every quantum boundary of the emulation, takes the
//    symbols each card sent during the quantum and hands them to the next card in node-id order.
//
// Determinism: symbols and frames move only at quantum boundaries, all cards' symbols are
// collected before any is delivered, and the ring order is the node ids, not the order cards
// were connected.
//
using System;
using System.Collections.Generic;
using System.Linq;
using Antmicro.Renode.Core;
using Antmicro.Renode.Exceptions;
using Antmicro.Renode.Logging;
using Antmicro.Renode.Network;
using Antmicro.Renode.Peripherals.CoSimulated;
using Antmicro.Renode.Plugins.CoSimulationPlugin.Connection.Protocols;

namespace Antmicro.Renode.Peripherals.CoSimulated
{
    public class NumaviaCard : CoSimulatedPeripheral, IMACInterface
    {
        public NumaviaCard(Machine machine, int maxWidth = 32, bool useAbsoluteAddress = true,
                           long frequency = VerilogTimeunitFrequency, ulong limitBuffer = LimitBuffer,
                           int timeout = DefaultTimeout, string address = null)
            : base(machine, maxWidth: maxWidth, useAbsoluteAddress: useAbsoluteAddress, frequency: frequency,
                   limitBuffer: limitBuffer, timeout: timeout, address: address)
        {
            // Frames leave at this machine's sync points, like the ring's symbols at the emulation's.
            machine.LocalTimeSource.SinksReportedHook += SendFrames;
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

        // The VIA engine's MAC address, as the ring script sets it ("02:4e:56:00:00:01"); the
        // switch delivers frames by it.
        public string MacAddress
        {
            get => MAC.ToString();
            set => MAC = MACAddress.Parse(value);
        }

        public MACAddress MAC { get; set; }

        public event Action<EthernetFrame> FrameReady;

        // A frame from the switch: its words go to the card's receiver, one beat per cycle.
        public void ReceiveFrame(EthernetFrame frame)
        {
            var bytes = frame.Bytes;
            for(var at = 0; at < bytes.Length; at += 4)
            {
                var count = Math.Min(4, bytes.Length - at);
                ulong word = 0;
                for(var i = 0; i < count; i++)
                {
                    word |= (ulong)bytes[at + i] << (8 * i);
                }
                word |= (ulong)(count - 1) << EthWordBytesShift;
                if(at + count == bytes.Length)
                {
                    word |= 1UL << EthWordLastBit;
                }
                connection.Write((ActionType)EthRxPushAction, 0, word);
            }
        }

        // Symbols the card sent since the last call, oldest first.
        public List<uint> TakeSentSymbols()
        {
            return Drain(RingTxPopAction).Select(value => (uint)value).ToList();
        }

        public void Receive(IEnumerable<uint> symbols)
        {
            foreach(var symbol in symbols)
            {
                connection.Write((ActionType)RingRxPushAction, 0, symbol);
            }
        }

        // Same numbers as numavia.renode.cosim (a test compares them).
        public const int RingTxPopAction = 200;
        public const int RingRxPushAction = 201;
        public const int SetStrapsAction = 202;
        public const int EthTxPopAction = 203;
        public const int EthRxPushAction = 204;
        public const int PresentBit = 63;
        public const int EthWordBytesShift = 32;
        public const int EthWordLastBit = 34;
        public const int MaxNodeId = 63;
        // The LiteEth MAC core pads short frames to this length before the FCS.
        public const int MinimumFrameBytes = 60;

        private void ApplyStraps()
        {
            connection.Write((ActionType)SetStrapsAction, 0, (ulong)nodeId | ((ulong)modeStrap << 8));
        }

        private IEnumerable<ulong> Drain(int popAction)
        {
            var values = new List<ulong>();
            while(true)
            {
                var answer = connection.Read((ActionType)popAction, 0);
                if((answer & (1UL << PresentBit)) == 0)
                {
                    return values;
                }
                values.Add(answer & ~(1UL << PresentBit));
            }
        }

        private void SendFrames()
        {
            if(connection == null || !connection.IsConnected)
            {
                return;
            }
            foreach(var word in Drain(EthTxPopAction))
            {
                var count = (int)((word >> EthWordBytesShift) & 3) + 1;
                for(var i = 0; i < count; i++)
                {
                    frameBytes.Add((byte)(word >> (8 * i)));
                }
                if((word & (1UL << EthWordLastBit)) == 0)
                {
                    continue;
                }
                while(frameBytes.Count < MinimumFrameBytes)
                {
                    frameBytes.Add(0);
                }
                if(EthernetFrame.TryCreateEthernetFrame(frameBytes.ToArray(), false, out var frame))
                {
                    FrameReady?.Invoke(frame);
                }
                else
                {
                    this.Log(LogLevel.Warning, "Dropped a malformed frame of {0} bytes from the card", frameBytes.Count);
                }
                frameBytes.Clear();
            }
        }

        private int nodeId;
        private byte modeStrap;
        private readonly List<byte> frameBytes = new List<byte>();
    }
}

namespace Antmicro.Renode.Tools.Network
{
    public static class NumaviaRingExtensions
    {
        public static void CreateNumaviaRing(this Emulation emulation, string name)
        {
            emulation.ExternalsManager.AddExternal(new NumaviaRing(), name);
        }
    }

    public class NumaviaRing : IExternal, IConnectable<NumaviaCard>, IDisposable
    {
        public void AttachTo(NumaviaCard card)
        {
            lock(cards)
            {
                if(cards.Any(c => c.NodeId == card.NodeId))
                {
                    throw new RecoverableException($"a card with node id {card.NodeId} is already in the ring");
                }
                cards.Add(card);
                if(!hooked)
                {
                    EmulationManager.Instance.CurrentEmulation.MasterTimeSource.SinksReportedHook += ExchangeSymbols;
                    hooked = true;
                }
            }
        }

        public void DetachFrom(NumaviaCard card)
        {
            lock(cards)
            {
                cards.Remove(card);
            }
        }

        public void Dispose()
        {
            if(hooked)
            {
                EmulationManager.Instance.CurrentEmulation.MasterTimeSource.SinksReportedHook -= ExchangeSymbols;
                hooked = false;
            }
        }

        // Every machine has finished the quantum: node i's symbols go to node i+1, the last node's to
        // the first (a one-node ring loops back to itself, as a looped-back cable would).
        private void ExchangeSymbols()
        {
            lock(cards)
            {
                var ring = cards.OrderBy(c => c.NodeId).ToList();
                if(ring.Count == 0)
                {
                    return;
                }
                var sent = ring.Select(c => c.TakeSentSymbols()).ToList();
                for(var i = 0; i < ring.Count; i++)
                {
                    ring[(i + 1) % ring.Count].Receive(sent[i]);
                }
            }
        }

        private readonly List<NumaviaCard> cards = new List<NumaviaCard>();
        private bool hooked;
    }
}
