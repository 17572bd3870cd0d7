"""Conversion of the card to Verilog, cached by its sources and parameters."""

from collections.abc import Callable
from pathlib import Path

import amaranth
from amaranth.back import verilog

from numavia.base import buildcache

from .card import Card, CardConfig

TOP_NAME = "numavia_card"
BASE_DIR = Path(buildcache.__file__).parent


def _source_files() -> list[Path]:
    """The gateware and the base modules it imports (not the whole base layer: a change to a
    definition only the firmware or the host uses must not rebuild the card)."""
    gateware = buildcache.source_files(Path(__file__).parent)
    return gateware + buildcache.imported_sources(gateware, BASE_DIR, "numavia.base", ("*.uasm",))


# Taken here, when every gateware module has been imported (through .card).
_SOURCES = buildcache.SourcesAsLoaded(_source_files, "gateware")


def sources() -> list[Path]:
    """The files the card's Verilog is made from: the gateware and the definitions below it, as
    this process loaded them (an error if they were edited since)."""
    return _SOURCES.files()


def card_verilog(config: CardConfig = CardConfig(), *, log: Callable[[str], object] | None = None) -> Path:
    """Path of ``numavia_card.v`` for ``config``, generated unless already cached."""
    key = buildcache.digest(sources(), params={"config": config.as_dict(), "amaranth": amaranth.__version__})

    def produce(folder: Path) -> None:
        text = verilog.convert(Card(config), name=TOP_NAME, emit_src=False)
        (folder / f"{TOP_NAME}.v").write_text(text)

    return buildcache.cached("gateware", key, produce, log=log) / f"{TOP_NAME}.v"
