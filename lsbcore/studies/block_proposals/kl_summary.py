"""The block-kl study's results reduced to what its histograms draw: per cell and proposal, the
counts over fixed log10-KL bins, the mean, the median, the share below 0.1 nats and ``n``.

The full results hold every KL (27,000 numbers, 400 kB); this summary (a few kB) is what the
dashboard ships as ``assets/block_kl.json`` (``python -m lsbcore.studies block-kl --summary
assets/block_kl.json``) and reads back with ``read_summary``: a size cap, bounded numbers and
checked shapes, a sentence for anything else. ``kl_figure`` draws the 3 x 3 histograms from it.
No torch here: the dashboard imports this to draw a shipped file.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from lsbcore import bounded_json

#: The three proposals, in the order tables and figures show them.
PROPOSALS = ("trained", "untrained", "context-free")
#: KLs below this (nats) fall in the histograms' first bin (log axis).
KL_FLOOR = 1e-4
#: The bins: log10 KL from log10(KL_FLOOR) to BIN_END in steps of BIN_WIDTH; a KL past the end
#: counts in the last bin.
BIN_END = 1.5
BIN_WIDTH = 0.25
MAX_BYTES = 256 * 2**10
#: The setup's numbers the figure and the verdicts (``block_kl``) read.
SETUP_KEYS = ("block_size", "instances", "train_determinism", "train_alpha", "near_zero")
COMMAND = "python -m lsbcore.studies block-kl --summary assets/block_kl.json"


def bin_edges() -> list[float]:
    start = math.log10(KL_FLOOR)
    count = round((BIN_END - start) / BIN_WIDTH)
    return [round(start + i * BIN_WIDTH, 6) for i in range(count + 1)]


def counts(kls, edges: list[float]) -> list[int]:
    """How many of ``kls`` (nats) fall in each bin of ``edges`` (log10 nats), the ends clipped
    into the first and last bins."""
    out = [0] * (len(edges) - 1)
    for kl in kls:
        x = math.log10(max(kl, KL_FLOOR))
        i = int((x - edges[0]) // BIN_WIDTH)
        out[min(max(i, 0), len(out) - 1)] += 1
    return out


def summarise(results: dict) -> dict:
    """The summary of the block-kl results (``block_kl.run_study``): its setup, the bin edges,
    and per cell and proposal the counts, mean, median, share below ``near_zero`` and ``n``."""
    near_zero = results["setup"]["near_zero"]
    edges = bin_edges()
    cells = []
    for cell in results["cells"]:
        out = {"determinism": cell["determinism"], "alpha": cell["alpha"]}
        for name in PROPOSALS:
            kls = cell[name]["kl"]
            out[name] = {
                "counts": counts(kls, edges),
                "mean": round(statistics.fmean(kls), 6),
                "median": round(statistics.median(kls), 6),
                "below": round(sum(kl < near_zero for kl in kls) / len(kls), 6),
                "n": len(kls),
            }
        cells.append(out)
    return {"setup": results["setup"], "bins": edges, "cells": cells}


# ----------------------------------------------------------------- reading it back
def read_summary(path) -> dict:
    """The summary at ``path``, checked; a ``ValueError`` sentence names what is wrong."""
    return check_summary(bounded_json.read_file(path, MAX_BYTES, "a KL summary"), Path(path).name)


def check_summary(summary, name: str = "the KL summary") -> dict:
    """``summary`` when its cells each hold, per proposal, counts over its bins that add up to
    ``n`` and the numbers the figure names."""
    if not isinstance(summary, dict) or not isinstance(summary.get("setup"), dict):
        raise ValueError(f"{name} is not a block-kl summary (no setup).")
    edges, cells = summary.get("bins"), summary.get("cells")
    if not isinstance(edges, list) or len(edges) < 2 or not all(map(_number, edges)):
        raise ValueError(f"{name} has no bins.")
    if not isinstance(cells, list) or not cells:
        raise ValueError(f"{name} holds no cells.")
    setup = summary["setup"]
    missing = [key for key in SETUP_KEYS if not _number(setup.get(key))]
    if missing:
        raise ValueError(f"{name} does not say its setup's {', '.join(missing)}.")
    for i, cell in enumerate(cells):
        if not _good_cell(cell, len(edges) - 1):
            raise ValueError(f"{name}: cell {i + 1} is not a cell of the summary.")
    return summary


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _good_cell(cell, bins: int) -> bool:
    if not isinstance(cell, dict) or not all(
        _number(cell.get(k)) for k in ("determinism", "alpha")
    ):
        return False
    for name in PROPOSALS:
        entry = cell.get(name)
        if not isinstance(entry, dict) or not all(
            _number(entry.get(k)) for k in ("mean", "median", "below", "n")
        ):
            return False
        c = entry.get("counts")
        if not (isinstance(c, list) and len(c) == bins and all(_number(x) for x in c)):
            return False
        if sum(c) != entry["n"]:
            return False
    return True


# ----------------------------------------------------------------- the figure
def kl_figure(summary: dict):
    """The histograms of log10 KL (nats), one panel per cell (rows: determinism, columns:
    alpha), the three proposals overlaid as bars over the summary's bins (plotly)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cells, edges = summary["cells"], summary["bins"]
    columns = len(dict.fromkeys(c["alpha"] for c in cells))
    rows = math.ceil(len(cells) / columns)
    titles = [f"determinism {c['determinism']:g}, alpha {c['alpha']:g}" for c in cells]
    figure = make_subplots(rows=rows, cols=columns, subplot_titles=titles, shared_xaxes=True)
    centres = [(a + b) / 2 for a, b in zip(edges, edges[1:], strict=False)]
    widths = [b - a for a, b in zip(edges, edges[1:], strict=False)]
    colours = {"trained": "#F1CE63", "untrained": "#9C755F", "context-free": "#4E79A7"}
    for index, cell in enumerate(cells):
        row, col = divmod(index, columns)
        for name, colour in colours.items():
            entry = cell[name]
            figure.add_trace(
                go.Bar(
                    x=centres, y=entry["counts"], width=widths, name=name,
                    marker_color=colour, opacity=0.6, showlegend=index == 0, legendgroup=name,
                    hovertemplate=f"{name}: %{{y}} of {entry['n']} (median {entry['median']:.3g}"
                    f", {entry['below']:.0%} below 0.1)<extra></extra>",
                ),
                row=row + 1, col=col + 1,
            )  # fmt: skip
    k = summary["setup"]["block_size"]
    figure.update_layout(
        barmode="overlay", height=760, bargap=0,
        title=f"KL(p || q) of the {k} x {k} block proposals on held-out grid networks "
        "(log10 nats)",
    )  # fmt: skip
    figure.update_xaxes(title_text="log10 KL (nats)", row=rows)
    return figure
