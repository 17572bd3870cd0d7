"""Writing benchmark results: a table as Markdown and CSV, the raw figures and the run's
provenance (command, configuration, version) as JSON, into one results folder."""

import csv
import json
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from numavia import __version__


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in ["numavia", *sys.argv[1:]]) if sys.argv else "numavia"


def rows_where(rows: Iterable[Mapping[str, Any]], **fields: Any) -> list[Mapping[str, Any]]:
    """The result rows (dicts) whose ``fields`` have the given values."""
    return [r for r in rows if all(r[k] == v for k, v in fields.items())]


def csv_row(row: Mapping[str, Any], fields: Iterable[str]) -> list[Any]:
    """A result row (dict) as CSV cells, floats to four decimals."""
    return [f"{row[k]:.4f}" if isinstance(row[k], float) else row[k] for k in fields]


def markdown_table(headers: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    return (
        "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]) + "\n"
    )


def write(
    folder: str | Path,
    name: str,
    *,
    title: str,
    headers: Sequence[Any],
    rows: Sequence[Sequence[Any]],
    figures: Any,
    config: Any,
    notes: Iterable[str] = (),
    text: str | None = None,
    plot: Callable[[Path], object] | None = None,
) -> str:
    """The one results writer of every benchmark: ``name``.md (``text``, a report of its own, or
    the table and ``notes``), ``name``.csv (the table), ``name``.json (the figures with the command
    line, the configuration and the version) and, given ``plot(path)``, ``name``.png, into
    ``folder``; returns the Markdown text."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    md = [f"# {title}", ""]
    md += [text] if text is not None else [markdown_table(headers, rows)] + [f"- {n}" for n in notes]
    md += ["", f"Command: `{command_line()}`", f"numavia {__version__}, {time.strftime('%Y-%m-%d %H:%M:%S')}", ""]
    report = "\n".join(md)
    (folder / f"{name}.md").write_text(report)
    with open(folder / f"{name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(headers)
        w.writerows(rows)
    (folder / f"{name}.json").write_text(
        json.dumps(
            {"title": title, "command": command_line(), "version": __version__, "config": config, "figures": figures},
            indent=2,
            default=str,
        )
        + "\n"
    )
    if plot is not None:
        plot(folder / f"{name}.png")
    return report


def size_axes(ax: Axes, title: str, unit: str, *, title_size: float | None = None, legend_size: float = 7) -> None:
    """A plot against message size: log2 size axis, labels, grid and legend, alike in every benchmark."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=title_size)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)


def progress(log: Callable[[str], object], done: int, total: int, message: str) -> None:
    """The progress line every benchmark prints for each point it measures: ``[done/total] message``."""
    log(f"[{done}/{total}] {message}")
