//
// Numavia ring link for Renode: joins the co-simulated cards of a ring's machines.
//
// Loaded by the ring script (`include @RingLink.cs`). It defines:
//  * NumaviaCard, Renode's CoSimulatedPeripheral plus the card's node-id strap and its ring
//    link, reached through protocol actions the card model (renode/cosim/card_main.cpp) adds;
//  * NumaviaRing, an external that, at every quantum boundary of the emulation, takes the
//    symbols each card sent during the quantum and hands them to the next card in node-id order.
//
// Determinism: symbols move only at quantum boundaries, all cards' symbols are collected before
// any is delivered, and the ring order is the node ids, not the order cards were connected.
//
using System;
using System.Collections.Generic;
using System.Linq;
using Antmicro.Renode.Core;
using Antmicro.Renode.Exceptions;
using Antmicro.Renode.Logging;
using Antmicro.Renode.Peripherals.CoSimulated;
using Antmicro.Renode.Plugins.CoSimulationPlugin.Connection.Protocols;

namespace Antmicro.Renode.Peripherals.CoSimulated
{
    public class NumaviaCard : CoSimulatedPeripheral
    {
        public NumaviaCard(Machine machine, int maxWidth = 32, bool useAbsoluteAddress = true,
                           long frequency = VerilogTimeunitFrequency, ulong limitBuffer = LimitBuffer,
                           int timeout = DefaultTimeout, string address = null)
            : base(machine, maxWidth: maxWidth, useAbsoluteAddress: useAbsoluteAddress, frequency: frequency,
                   limitBuffer: limitBuffer, timeout: timeout, address: address)
        {
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
                connection.Write((ActionType)SetStrapsAction, 0, (ulong)value | ((ulong)modeStrap << 8));
            }
        }

        // The board switches (MODE_STRAP); bit 0 selects NUMA mode.
        public byte ModeStrap
        {
            get => modeStrap;
            set
            {
                modeStrap = value;
                connection.Write((ActionType)SetStrapsAction, 0, (ulong)nodeId | ((ulong)value << 8));
            }
        }

        // Symbols the card sent since the last call, oldest first.
        public List<uint> TakeSentSymbols()
        {
            var symbols = new List<uint>();
            while(true)
            {
                var answer = connection.Read((ActionType)RingTxPopAction, 0);
                if((answer & SymbolPresent) == 0)
                {
                    return symbols;
                }
                symbols.Add((uint)answer);
            }
        }

        public void Receive(IEnumerable<uint> symbols)
        {
            foreach(var symbol in symbols)
            {
                connection.Write((ActionType)RingRxPushAction, 0, symbol);
            }
        }

        // Same numbers as numavia.renode.cosim.RING_ACTIONS (a test compares them).
        public const int RingTxPopAction = 200;
        public const int RingRxPushAction = 201;
        public const int SetStrapsAction = 202;
        public const ulong SymbolPresent = 1UL << 32;
        public const int MaxNodeId = 63;

        private int nodeId;
        private byte modeStrap;
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
