"""Renode files for a ring of Numavia nodes, generated from the SoC's ``csr.json``.

``generate`` writes, into one folder: the node platform (``.repl``), the ring script (``.resc``),
the Robot tests, the ring connector (``RingLink.cs``), the firmware image(s) and, under
``cosim/``, what the CMake project in ``renode/cosim`` builds the co-simulated card from. Same
inputs, same bytes.
"""

import hashlib
import json
from decimal import Decimal
from pathlib import Path

from numavia.soc import firmware as node_firmware

from . import cosim, platform, robot, script
from .soc import RenodeError, describe, load_csr_json

ROBOT_FILE = "numavia_ring.robot"
#: Default quantum: how often the emulation's machines meet, and how far the cards run at once
#: between CPU accesses (in windows of the ring delay).
DEFAULT_QUANTUM_CYCLES = 1000
#: Card cycles from one card's ring transmitter to the next card's receiver: the Verilator ring's
#: default (soc/verilator/ring_run.hpp), so the two simulations time the ring alike.
RING_DELAY_CYCLES = 4
#: Virtual seconds a node may take to print its ready line (the bare-metal firmware takes about 10 ms).
BOOT_TIMEOUT_S = 1

__all__ = ["RenodeError", "generate", "render", "ROBOT_FILE", "DEFAULT_QUANTUM_CYCLES", "RING_DELAY_CYCLES"]


def provenance(csr):
    """Names the csr.json by content, so a generated file says which SoC it describes."""
    canonical = json.dumps(csr, sort_keys=True, separators=(",", ":")).encode()
    return f"csr.json sha256:{hashlib.sha256(canonical).hexdigest()[:16]}"


def quantum_seconds(cycles, clock_hz):
    return f"{Decimal(cycles) / Decimal(clock_hz):f}"


def image_regions(image):
    """The memories a node's image fills: a raw image (a path) is the ROM's; a resolved one
    (``{region: bytes}``, see :func:`memory_images`) says."""
    return tuple(image) if isinstance(image, dict) else (node_firmware.ROM,)


def firmware_files(nodes, node_images, every_image=None):
    """Each node's image files, ``{region: file name}``: the ``firmware`` files unless
    ``node_images`` gives the node an image of its own (``firmware_node<i>`` files)."""
    unknown = sorted(set(node_images) - set(range(nodes)))
    if unknown:
        raise RenodeError(f"--firmware for node {unknown[0]}, but the ring's nodes are 0..{nodes - 1}")
    return [
        {
            region: script.firmware_file(region, n if n in node_images else None)
            for region in image_regions(node_images[n] if n in node_images else every_image)
        }
        for n in range(nodes)
    ]


def _is_choice(text):
    return text.partition("=")[0] in node_firmware.CHOICES


def _image(text):
    """One ``--firmware`` image: a firmware choice (kept as its text) or a raw ROM image (a path)."""
    if _is_choice(text):
        node_firmware.parse_choice(text)  # bare-metal=PATH and the like: refused here
        return text
    if not Path(text).is_file():
        raise RenodeError(f"--firmware: {text} is not a file")
    return Path(text)


def firmware_images(options):
    """``--firmware`` options (``IMAGE`` or ``NODE=IMAGE``) as (every node's image or None,
    ``{node: image}``). An image is a firmware choice of ``numavia sim`` (``bare-metal``,
    ``zephyr``, ``zephyr-shell``, ``zephyr=PATH``; a string) or a raw ROM image (a path)."""
    every, per_node = None, {}
    for option in options:
        node, sep, image = option.partition("=")
        if not sep or _is_choice(option):
            if every is not None:
                raise RenodeError(f"--firmware {option}: an image for every node was given already ({every})")
            every = _image(option)
        elif not node.isdigit():
            raise RenodeError(f"--firmware {option}: {node!r} is not a node number")
        else:
            per_node[int(node)] = _image(image)
    return every, per_node


def memory_images(image, soc_dir, log=print):
    """``{region: bytes}`` a node's memories hold at reset for ``image`` (see
    :func:`firmware_images`): a choice is built (cached) or checked for the SoC in ``soc_dir``, as
    ``numavia sim`` does, so a Zephyr image goes to main RAM behind the ROM's jump."""
    if isinstance(image, Path):
        return {node_firmware.ROM: image.read_bytes()}
    memories = load_csr_json(Path(soc_dir) / "csr.json")["memories"]
    return node_firmware.memory_images(node_firmware.build(image, soc_dir, log=log), memories)


def render(
    csr,
    *,
    nodes,
    card_config,
    ready_marker,
    card_model_id,
    quantum_cycles=DEFAULT_QUANTUM_CYCLES,
    ring_delay=RING_DELAY_CYCLES,
    node_images=(),
    every_image=None,
):
    """``{file name: text}`` of the generated text files (no file system access). ``every_image``
    and the values of ``node_images`` are only looked at for the memories they fill
    (:func:`image_regions`)."""
    if nodes < 1:
        raise RenodeError(f"a ring needs at least one node, not {nodes}")
    soc = describe(csr)
    source = provenance(csr)
    return {
        script.REPL_FILE: platform.repl(soc, provenance=source),
        script.RESC_FILE: script.resc(
            soc,
            nodes=nodes,
            quantum_seconds=quantum_seconds(quantum_cycles, soc.clock_hz),
            ring_delay=ring_delay,
            card_model_id=card_model_id,
            firmware_files=firmware_files(nodes, node_images, every_image),
            provenance=source,
        ),
        ROBOT_FILE: robot.robot(
            soc,
            nodes=nodes,
            ready_marker=ready_marker,
            card_config=card_config,
            boot_timeout_s=BOOT_TIMEOUT_S,
            provenance=source,
        ),
        **({robot.HOST_LIBRARY_FILE: robot.host_library()} if soc.ethernet else {}),
        f"cosim/{cosim.WRAPPER_FILE}": cosim.wrapper_verilog(soc, card_config),
        f"cosim/{cosim.HEADER_FILE}": cosim.header(soc, card_config),
    }


def generate(
    csr_json,
    out_dir,
    *,
    nodes,
    card_config,
    card_verilog,
    ready_marker,
    firmware,
    quantum_cycles=DEFAULT_QUANTUM_CYCLES,
    ring_delay=RING_DELAY_CYCLES,
    node_images=None,
):
    """Write every file into ``out_dir``: ``firmware`` is every node's image, ``node_images``
    ``{node: image}`` the nodes that run another one; an image is a raw ROM image (a path) or
    ``{region: bytes}`` (:func:`memory_images`). Returns the paths written, sorted."""
    out_dir = Path(out_dir)
    node_images = dict(node_images or {})
    files = render(
        load_csr_json(csr_json),
        nodes=nodes,
        card_config=card_config,
        ready_marker=ready_marker,
        card_model_id=cosim.model_id(card_verilog),
        quantum_cycles=quantum_cycles,
        ring_delay=ring_delay,
        node_images=node_images,
        every_image=firmware,
    )
    files[f"cosim/{cosim.CMAKE_INPUTS_FILE}"] = cosim.cmake_inputs(card_verilog, nodes)
    contents = {
        **{name: text.encode() for name, text in files.items()},
        script.CONNECTOR_FILE: cosim.CONNECTOR_SOURCE.read_bytes(),
    }
    for node, image in [(None, firmware), *node_images.items()]:
        regions = image if isinstance(image, dict) else {node_firmware.ROM: Path(image).read_bytes()}
        contents.update({script.firmware_file(region, node): data for region, data in regions.items()})
    written = []
    for name, data in sorted(contents.items()):
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # An unchanged file keeps its time, so the card model's CMake build does not start over.
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
        written.append(path)
    return written
