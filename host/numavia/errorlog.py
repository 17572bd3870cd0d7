"""The cards' error counters and the error log that ``numavia status`` keeps from them.

The card counts faults in hardware (``regmap.ERROR_COUNTERS``: ring CRC drops and resends,
VIA bad frames, retransmissions, refused doorbells and RDMA, sequencer protocol errors...) but has
no log memory. Each ``numavia status`` reads every node's counters with the node's cycle counter
and appends one log line per counter that grew since the previous look (in the same simulation),
so the log says when (to within two looks, in card cycles) and where each kind of fault appeared.
The log and the last snapshot live beside the session file and start afresh with a new session.
"""

import json
from dataclasses import dataclass

from numavia.base import regmap

COUNTER_MODULO = 1 << 32  # VIA counters wrap; ring counters saturate (a delta of 0 then)


def counter_name(block, register):
    return f"{block}.{register}"


def counter_doc(block, register):
    return regmap.CARD.block(block).register(register).doc


def card_features(read):
    """Names of the optional blocks the card was built with (``ctrl.FEATURES``), lower case."""
    features = regmap.CTRL.register("FEATURES")
    value = read("ctrl", "FEATURES")
    return [field.name.lower() for field in features.fields if value & field.mask]


def read_errors(read):
    """``{name: value}`` of one node's error counters and ``ring.ERRORS``; ``read(block, reg)``.
    A card built without the VIA engine has no VIA counters (its VIA block does not answer)."""
    with_via = "via" in card_features(read)
    values = {counter_name(b, r): read(b, r) for b, r in regmap.ERROR_COUNTERS if b != "via" or with_via}
    values["ring.ERRORS"] = read("ring", "ERRORS")
    return values


def read_cycles(read):
    lo = read("ctrl", "CYCLES_LO")  # latches CYCLES_HI
    return read("ctrl", "CYCLES_HI") << 32 | lo


@dataclass
class Entry:
    node: int
    cycle: int
    counter: str
    delta: int
    total: int

    def line(self):
        block, register = self.counter.split(".")
        what = (
            "sticky invariant bits set: " + f"{self.total:#x}"
            if self.counter == "ring.ERRORS"
            else f"+{self.delta} (total {self.total})"
        )
        return f"node {self.node} cycle {self.cycle}: {self.counter} {what}: {counter_doc(block, register)}"


class ErrorLog:
    """Append-only log of error-counter increases, tied to one simulation (its pid)."""

    def __init__(self, folder, session_pid):
        self.log_path = folder / "errors.log"
        self.state_path = folder / "errors.json"
        self.pid = session_pid
        state = {}
        if self.state_path.exists():
            try:
                state = json.loads(self.state_path.read_text())
            except json.JSONDecodeError:
                state = {}
        if state.get("pid") != session_pid:  # another simulation: start a new log
            state = {"pid": session_pid, "snapshots": {}}
            self.log_path.unlink(missing_ok=True)
        self.state = state

    def update(self, node, cycle, values):
        """Record ``values`` (from :func:`read_errors`) of ``node`` at ``cycle``; new entries."""
        before = self.state["snapshots"].get(str(node), {})
        entries = []
        for name, value in values.items():
            old = before.get(name, 0)
            if name == "ring.ERRORS":
                if value & ~old:
                    entries.append(Entry(node, cycle, name, 0, value))
            elif value != old:
                entries.append(Entry(node, cycle, name, (value - old) % COUNTER_MODULO, value))
        self.state["snapshots"][str(node)] = values
        if entries:
            with self.log_path.open("a") as f:
                f.writelines(e.line() + "\n" for e in entries)
        return entries

    def save(self):
        self.state_path.write_text(json.dumps(self.state))

    def lines(self):
        return self.log_path.read_text().splitlines() if self.log_path.exists() else []
