"""Kernel traces on disk, cached under ``build/splash2/`` by kernel, size, process count,
placement, slice size and cost model (and the kernels' source), so a benchmark re-run replays
without recomputing. A folder holds ``node<i>.trace`` per process and ``summary.json``."""

import json
from dataclasses import asdict
from pathlib import Path

from numavia import instrument
from numavia.base import buildcache
from numavia.instrument import CostModel

from . import generate, params_for

SOURCE_DIR = Path(__file__).parent


def trace_key(kernel, size, processes, placement, slice_bytes, cost, access):
    params = params_for(kernel, size)
    digest = buildcache.digest(
        buildcache.source_files(SOURCE_DIR) + [Path(instrument.__file__)],
        params={
            "kernel": kernel,
            "params": asdict(params),
            "processes": processes,
            "placement": placement,
            "slice_bytes": slice_bytes,
            "cost": asdict(cost),
            "access": access,
        },
    )
    return f"{kernel}-{size}-p{processes}-{placement}-{access}-{digest[:12]}"


def traces(kernel, size, processes, *, placement="paper", slice_bytes, cost=None, access="line", log=None):
    """The folder of the traces (generated and checked first if not cached)."""
    cost = cost or CostModel()
    key = trace_key(kernel, size, processes, placement, slice_bytes, cost, access)

    def produce(folder):
        if log:
            log(
                f"{kernel} ({size}), {processes} process(es), {placement} placement, {access} accesses: "
                "computing and recording"
            )
        g = generate(
            kernel,
            params_for(kernel, size),
            processes,
            placement=placement,
            slice_bytes=slice_bytes,
            cost=cost,
            access=access,
        )
        g.machine.write_traces(folder)
        summary = json.loads((folder / "summary.json").read_text())
        summary.update(
            {
                "kernel": kernel,
                "size": size,
                "placement": placement,
                "params": asdict(g.params),
                "describe": g.params.describe(),
                "check_error": g.error,
                "info": _jsonable(g.info),
            }
        )
        (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")

    return buildcache.cached("splash2", key, produce, log=log)


def summary(folder):
    return json.loads((Path(folder) / "summary.json").read_text())


def _jsonable(value):
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))
