"""Exhaustive check of the SCI microcode as a benchmark: every interleaving of model cards sharing
one line (numavia.gateware.microcode.protocol_explorer), with the size of the search, what it
reached and what it found."""

from pathlib import Path

from numavia.base.coherence import CacheState
from numavia.base.microcode import isa
from numavia.base.microcode.assembler import assemble
from numavia.bench import results
from numavia.gateware.microcode.protocol_explorer import ProtocolExplorer, format_counterexample


def run(config, *, log=print, words=None):
    """Explore ``config`` (an ExploreConfig) with the control store assembled from sci.uasm (or
    ``words``); the figures as a dict."""
    if words is None:
        source = Path(isa.__file__).with_name("sci.uasm")
        words = assemble(source.read_text(), source.name).words
    ops = ", ".join(f"node {n}: {k}" for n, k in enumerate(config.ops))
    log(
        f"exploring {config.nodes} cards sharing a line of node {config.home} (operations per host: {ops}; "
        f"{'/'.join(config.kinds)}; {'ordered' if config.ordered else 'reordering'} network; "
        f"caching a line at its {'first' if config.cache_first_miss else 'second'} read miss)"
    )
    found = ProtocolExplorer(words, config, log=log).run()
    problems = found.violations + found.deadlocks
    return {
        "config": {
            "nodes": config.nodes,
            "home": config.home,
            "ops": list(config.ops),
            "kinds": list(config.kinds),
            "line_bytes": config.line_bytes,
            "ordered": config.ordered,
            "max_states": config.max_states,
            "cache_first_miss": config.cache_first_miss,
        },
        "states": found.states,
        "transitions": found.transitions,
        "depth": found.depth,
        "final_states": found.final_states,
        "seconds": round(found.seconds, 1),
        "truncated": found.truncated,
        "violations": len(found.violations),
        "deadlocks": len(found.deadlocks),
        "cache_states": {n: sorted(s.name for s in states) for n, states in found.cache_states.items()},
        "memory_states": sorted(f"{m.name}{' locked' if locked else ''}" for m, locked in found.memory_states),
        "commands": sorted(found.commands),
        "events": dict(sorted(found.events.items())),
        "counterexample": format_counterexample(*problems[0]) if problems else None,
    }


def report(figures, out):
    keys = ["states", "transitions", "depth", "final_states", "seconds", "violations", "deadlocks", "truncated"]
    rows = [[k.replace("_", " "), figures[k]] for k in keys]
    rows += [[f"transitions counting {name}", count] for name, count in figures["events"].items()]
    every = len(CacheState)
    notes = [
        f"node {n}{' (home)' if n == figures['config']['home'] else ''}: {len(names)} of {every} cache states "
        f"reached: {', '.join(names)}"
        for n, names in figures["cache_states"].items()
    ]
    notes += [
        f"home directory states reached: {', '.join(figures['memory_states'])}",
        f"requests delivered: {', '.join(figures['commands'])}",
        "Every state checked: no model fault or protocol error, hits see the last write, one writer "
        "or many readers, the home's list well formed; quiescent states: the full list and data "
        "check. No state without a successor but the final ones, and a final state reachable from "
        "every state.",
    ]
    if figures["counterexample"]:
        (Path(out) / "counterexample.txt").write_text(figures["counterexample"] + "\n")
        notes.append(f"counterexample in {out}/counterexample.txt")
    return results.write(
        out,
        "protocol",
        title=f"Protocol exploration, {figures['config']['nodes']} cards on one line",
        headers=["figure", "value"],
        rows=rows,
        figures=figures,
        config=figures["config"],
        notes=notes,
    )
