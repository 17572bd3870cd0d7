"""Renode files for a ring of Numavia nodes, generated from the SoC's ``csr.json``.

``generate`` writes, into one folder: the node platform (``.repl``), the ring script (``.resc``),
the Robot tests, the ring connector (``RingLink.cs``) and, under ``cosim/``, what the CMake
project in ``renode/cosim`` builds the co-simulated card from. Same inputs, same bytes.
"""

import hashlib
import json
import shutil
from decimal import Decimal
from pathlib import Path

from . import cosim, platform, robot, script
from .soc import RenodeError, describe, load_csr_json

ROBOT_FILE = "numavia_ring.robot"
#: Default quantum: the ring moves symbols once per quantum, so this is also the per-hop delay.
DEFAULT_QUANTUM_CYCLES = 1000
BOOT_TIMEOUT_S = 60

__all__ = ["RenodeError", "generate", "render", "ROBOT_FILE", "DEFAULT_QUANTUM_CYCLES"]


def provenance(csr):
    """Names the csr.json by content, so a generated file says which SoC it describes."""
    canonical = json.dumps(csr, sort_keys=True, separators=(",", ":")).encode()
    return f"csr.json sha256:{hashlib.sha256(canonical).hexdigest()[:16]}"


def quantum_seconds(cycles, clock_hz):
    return f"{Decimal(cycles) / Decimal(clock_hz):f}"


def render(csr, *, nodes, card_config, ready_marker, quantum_cycles=DEFAULT_QUANTUM_CYCLES):
    """``{file name: text}`` of the generated text files (no file system access)."""
    if nodes < 1:
        raise RenodeError(f"a ring needs at least one node, not {nodes}")
    soc = describe(csr)
    source = provenance(csr)
    return {
        script.REPL_FILE: platform.repl(soc, quantum_cycles=quantum_cycles, provenance=source),
        script.RESC_FILE: script.resc(soc, nodes=nodes, quantum_seconds=quantum_seconds(quantum_cycles, soc.clock_hz),
                                      provenance=source),
        ROBOT_FILE: robot.robot(soc, nodes=nodes, ready_marker=ready_marker,
                                slice_bytes=card_config.address_map().slice_bytes,
                                boot_timeout_s=BOOT_TIMEOUT_S, provenance=source),
        **({robot.HOST_LIBRARY_FILE: robot.host_library()} if soc.ethernet else {}),
        f"cosim/{cosim.WRAPPER_FILE}": cosim.wrapper_verilog(soc, card_config),
        f"cosim/{cosim.HEADER_FILE}": cosim.header(soc, card_config),
    }


def generate(csr_json, out_dir, *, nodes, card_config, card_verilog, ready_marker,
             quantum_cycles=DEFAULT_QUANTUM_CYCLES):
    """Write every file into ``out_dir``; returns their paths, sorted."""
    out_dir = Path(out_dir)
    files = render(load_csr_json(csr_json), nodes=nodes, card_config=card_config, ready_marker=ready_marker,
                   quantum_cycles=quantum_cycles)
    files[f"cosim/{cosim.CMAKE_INPUTS_FILE}"] = cosim.cmake_inputs(card_verilog)
    written = []
    for name, text in sorted(files.items()):
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    connector = out_dir / script.CONNECTOR_FILE
    shutil.copyfile(cosim.CONNECTOR_SOURCE, connector)
    return sorted([*written, connector])
