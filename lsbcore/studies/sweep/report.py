"""The "which g where" map as a report: a text table per panel, the map's JSON and a
self-contained HTML page with one heat map per panel (plotly.js embedded once, opens offline).

    python -m lsbcore.studies.sweep.report sweeps/map.sqlite --html map.html --json map.json
    python -m lsbcore.studies.sweep.report assets/which_g_where.json --html map.html

``RESULTS`` is a sweep's SQLite results file (``lsbcore.studies.sweep.store``; one still being
written is
fine) or a map's JSON (``lsbcore.studies.sweep.which_g_where``). ``map_figure`` draws one panel; the
dashboard's "Which g where" tab draws the same figure.
"""

from __future__ import annotations

import argparse
import html
import math
import sys
from pathlib import Path

import plotly.graph_objects as go

from lsbcore import interrupt
from lsbcore.out_path import output_file, write_text
from lsbcore.studies import figures
from lsbcore.studies.sweep.store import StoreError, read_results
from lsbcore.studies.sweep.which_g_where import build_map, read_map, write_map
from lsbcore.studies.sweep.winner import TIE_Z

__all__ = [
    "TIE_COLOUR",
    "load_map",
    "main",
    "map_figure",
    "map_html",
    "map_text",
    "standing_text",
    "point_hover",
    "point_label",
]

#: The legend's swatch for a tie (a tied point is drawn in a lighter shade of its leader).
TIE_COLOUR = "#D9D9D9"
EMPTY_COLOUR = "#FFFFFF"
_CELL_PX = 56  # height of one sigma row in the heat map
_COMPACT_PX = 24  # ... in a map of many cells
_COMPACT = (12, 20)  # a map over more lambda (columns) or sigma (rows) values than these


def _g(value) -> str:
    """A number for a label: ``n/a`` when missing, ``∞`` for infinity (a lead with no spread
    over seeds has an infinite z)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.3g}"


def _percent(margin) -> str:
    if margin is None or (isinstance(margin, float) and math.isnan(margin)):
        return ""
    if math.isinf(margin):
        return "+inf%"
    return f"+{100 * margin:.0f}%"


def point_label(point: dict, compact: bool = False) -> str:
    """What a map cell shows: the winner's margin (``+12%``), or ``≈ tie`` and how many
    (``≈`` alone in a ``compact`` map, whose cells are small)."""
    tied = point.get("tied") or []
    if point.get("winner") is None:
        return "" if compact else "no ESS"
    if len(tied) > 1:
        return "≈" if compact else f"≈ tie ×{len(tied)}"
    return _percent(point.get("margin"))


def point_hover(point: dict) -> str:
    """The hover text of a map cell: winner or tie, margin, z, then every sampler's mean ESS
    per 1,000 evaluations with its standard error over seeds, and the point's notes."""
    lines = [f"λ = {point['lam']:g}, σ = {point['sigma']:g}"]
    winner = point.get("winner")
    tied = point.get("tied") or []
    if winner is None:
        lines.append("no sampler gave a finite ESS")
    elif len(tied) > 1:
        others = ", ".join(html.escape(figures.sampler_label(s)) for s in tied[1:])
        leader = html.escape(figures.sampler_label(winner))
        lines.append(
            f"<b>tie</b> led by {leader}; within {TIE_Z:g} paired standard errors: {others}"
        )
    else:
        lines.append(f"<b>winner {html.escape(figures.sampler_label(winner))}</b>")
    if winner is not None:
        lines.append(f"margin {_percent(point.get('margin')) or 'n/a'}, z = {_g(point.get('z'))}")
    lines.append("ESS per 1,000 evaluations (mean ± s.e. over seeds):")
    means, stderrs = point.get("means") or {}, point.get("stderrs") or {}
    n_seeds = point.get("n_seeds") or {}
    for rank, name in enumerate(point.get("order") or [], start=1):
        n = n_seeds.get(name)
        seeds = f"{n} seed{'s' if n != 1 else ''}" if isinstance(n, int) else "seeds n/a"
        lines.append(
            f"{rank}. {html.escape(figures.sampler_label(name))}: "
            f"{_g(means.get(name))} ± {_g(stderrs.get(name))} ({seeds})"
        )
    lines.extend(html.escape(note) for note in point.get("notes") or [])
    return "<br>".join(lines)


def _tint(hex_colour: str, amount: float = 0.6) -> str:
    """``hex_colour`` mixed with white (``amount`` of white): a tied point's lighter shade."""
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    r, g, b = (round(c + (255 - c) * amount) for c in (r, g, b))
    return f"#{r:02X}{g:02X}{b:02X}"


def _categories(samplers: list[str]) -> list[str]:
    """The heat map's colours: each sampler's own (a clear winner), then each sampler's
    lighter shade (a tie that sampler leads)."""
    solid = [figures.sampler_colour(s) for s in samplers]
    return solid + [_tint(c) for c in solid]


def map_figure(panel: dict, samplers: list[str], title: str | None = None) -> go.Figure:
    """One panel of the map (one target and mu): lambda across, sigma up, each cell coloured
    by its winner, in a lighter shade and marked "≈ tie" where the seeds cannot tell the
    winner from another sampler; the winner's margin written in the cell, the ranking in the
    hover text.

    ``panel`` and ``samplers`` are a map document's (``which_g_where.build_map`` or
    ``read_map``). Each cell's ``customdata`` is ``[lam, sigma]``, so a click handler can
    open that point. Points missing from the panel are left white.
    """
    lam, sigma = list(panel["lam"]), list(panel["sigma"])
    colours = _categories(samplers)
    compact = len(lam) > _COMPACT[0] or len(sigma) > _COMPACT[1]
    z = [[None] * len(lam) for _ in sigma]
    text = [[""] * len(lam) for _ in sigma]
    hover = [["no result at this point"] * len(lam) for _ in sigma]
    custom = [[[x, y] for x in lam] for y in sigma]
    for point in panel["points"]:
        try:
            i, j = sigma.index(point["sigma"]), lam.index(point["lam"])
        except ValueError:
            continue  # a checked map has none; a hand-made panel is drawn without it
        winner = point.get("winner")
        if winner is not None:
            tied = point.get("tied") or []
            tie = len(samplers) if len(tied) > 1 else 0
            z[i][j] = tie + samplers.index(winner)
        text[i][j] = point_label(point, compact)
        hover[i][j] = point_hover(point)
    n = len(colours)
    scale = []
    for k, colour in enumerate(colours):  # one flat band per category
        scale += [[k / n, colour], [(k + 1) / n, colour]]
    fig = go.Figure(
        go.Heatmap(
            x=[f"{v:g}" for v in lam],
            y=[f"{v:g}" for v in sigma],
            z=z,
            zmin=-0.5,
            zmax=n - 0.5,
            colorscale=scale,
            showscale=False,
            text=text,
            texttemplate="%{text}",
            textfont={"size": 9 if compact else 12},
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
            customdata=custom,
            xgap=2,
            ygap=2,
            name="winner",
        )
    )
    legend = [(figures.sampler_label(s), figures.sampler_colour(s)) for s in samplers]
    legend.append(("≈ tie: lighter shade of the leader", TIE_COLOUR))
    for name, colour in legend:  # one swatch per sampler; the heat map itself has no legend
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker={"symbol": "square", "size": 14, "color": colour},
                name=name,
                showlegend=True,
                hoverinfo="skip",
            )
        )
    if title is None:
        title = f"{panel['target']}, μ = {panel['mu']:g}: which g mixes best per evaluation"
    top = 60 if title else 20
    fig.update_layout(
        template="plotly_white",
        title={"text": title, "x": 0.01, "xanchor": "left"},
        height=max(280, top + 140 + (_COMPACT_PX if compact else _CELL_PX) * len(sigma)),
        margin={"l": 60, "r": 20, "t": top, "b": 95},
        # at the figure's foot whatever its height (below the lambda axis's title)
        legend={
            "orientation": "h",
            "yref": "container",
            "yanchor": "bottom",
            "y": 0.0,
            "x": 0,
            "xanchor": "left",
        },  # fmt: skip
        font={"size": 13},
        plot_bgcolor=EMPTY_COLOUR,
    )
    fig.update_xaxes(title_text="λ (coupling)", type="category", showgrid=False)
    fig.update_yaxes(title_text="σ (noise)", type="category", showgrid=False)
    return fig


# ----------------------------------------------------------------------------- text
def _cell_text(point: dict) -> str:
    tied = point.get("tied") or []
    winner = point.get("winner")
    if winner is None:
        return "-"
    if len(tied) > 1:
        return "~" + "/".join(tied)
    margin = _percent(point.get("margin"))
    return f"{winner} {margin}".strip()


def panel_text(panel: dict) -> str:
    """One panel as a text table: sigma rows, lambda columns, each cell the winner and its
    margin, or ``~a/b`` for a tie."""
    cells = {(p["sigma"], p["lam"]): _cell_text(p) for p in panel["points"]}
    header = ["σ \\ λ"] + [f"{v:g}" for v in panel["lam"]]
    rows = [
        [f"{s:g}"] + [cells.get((s, x), "") for x in panel["lam"]] for s in reversed(panel["sigma"])
    ]
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    return f"{panel['target']}, μ = {panel['mu']:g}\n" + "\n".join(lines)


def protocol_text(doc: dict) -> str:
    """One sentence: the protocol, the seeds and the tie rule."""
    p = doc["protocol"]
    seeds = doc.get("seeds") or []
    if seeds:
        shown = ", ".join(map(str, seeds[:10])) + (", ..." if len(seeds) > 10 else "")
        seed_text = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({shown})"
    else:
        seed_text = "no seeds"
    return (
        f"Protocol: size {p['size']}, {p['chains']} chains, burn-in {p['burn_in']:,}, "
        f"{p['steps']:,} mixing steps, ESS lag window {p['max_lag']:,}; {seed_text}. "
        "The winner has the highest mean ESS per 1,000 target evaluations; a sampler within "
        f"{TIE_Z:g} paired standard errors of it (seed by seed) is tied with it."
        + (" With one seed no tie can be called: every winner rests on one seed." if
           len(seeds) == 1 else "")
    )  # fmt: skip


def standing_text(doc: dict) -> str:
    """How often each sampler wins or ties with the winner over every panel's points, and how
    many points have a winner the seeds confirm (no tie): the figures behind "which g where"."""
    points = [p for panel in doc["panels"] for p in panel["points"] if p.get("winner")]
    best: dict = {}
    clear: dict = {}
    for p in points:
        tied = p.get("tied") or []
        for name in tied if len(tied) > 1 else [p["winner"]]:
            best[name] = best.get(name, 0) + 1
        if len(tied) <= 1:
            clear[p["winner"]] = clear.get(p["winner"], 0) + 1
    ranked = sorted(best.items(), key=lambda kv: -kv[1])
    wins = sorted(clear.items(), key=lambda kv: -kv[1])
    return (
        f"Winner or tied with it, of {len(points)} points: "
        + ", ".join(f"{n} {k}" for n, k in ranked)
        + f". A winner without a tie at {sum(clear.values())} points"
        + (": " + ", ".join(f"{n} {k}" for n, k in wins) if wins else "")
        + "."
    )


def map_text(doc: dict) -> str:
    """The whole map as text: the protocol, who wins or ties how often, then one table per
    panel."""
    parts = [protocol_text(doc), standing_text(doc)]
    parts += ["Cells: winner and its margin over the runner-up; ~a/b: a tie."]
    parts += [f"Note: {n}" for n in doc.get("notes") or []]
    parts += [panel_text(panel) for panel in doc["panels"]]
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------- HTML
_CSS = """
.swatch { margin: 0 0.3em 0 0.8em; }
pre { background: #f6f6f6; padding: 0.6rem; font-size: 0.85rem; overflow-x: auto; }
"""  # beside the reports' own style (lsbcore.studies.experiment.report)


def map_html(doc: dict, source: str) -> str:
    """The map as one self-contained HTML page: one heat map per panel, plotly.js embedded
    once (the experiment report's way: gzip'd, unpacked by the browser), nothing from the
    network."""
    from lsbcore.studies.experiment.report import report_page  # the reports' one page layout

    samplers = doc["samplers"]
    swatches = "".join(
        f'<span class="swatch" style="background:{figures.sampler_colour(s)}"></span>'
        f"{html.escape(figures.sampler_label(s))} ({html.escape(s)})"
        for s in samplers
    )
    parts = []
    for i, panel in enumerate(doc["panels"]):
        fig = map_figure(panel, samplers, title="")  # the heading above says which panel
        height = int(fig.layout.height)
        heading = f"{panel['target']}, μ = {panel['mu']:g}"
        parts.append(
            f"<h2>{html.escape(heading)}</h2>"
            f'<div class="figure" id="map-{i}" style="height:{height}px"></div>'
            f'<script type="application/json" data-figure="map-{i}">'
            f"{figures.figure_json(fig)}</script>"
            f"<details><summary>The map as text</summary>"
            f"<pre>{html.escape(panel_text(panel))}</pre></details>"
        )
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in doc.get("notes") or [])
    title = f"Which g where: {source}"
    body = f"""<p class="note">{html.escape(protocol_text(doc))} The number in a cell is the
winner's margin over the runner-up (+25%: it mixes 25% more per evaluation); a lighter cell
marked "≈ tie" is a tie its colour's sampler leads; hover for every sampler's ranking.</p>
{notes}
<p>{swatches}</p>
{"".join(parts)}"""
    return report_page(title, body, _CSS)


# ----------------------------------------------------------------------------- command
def load_map(path: Path) -> dict:
    """The map of ``path``: a sweep's SQLite results (mapped now) or a map's JSON (checked).
    A ``ValueError`` with one sentence when it is neither, or holds no finished cell."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist.")
    if not path.is_file():
        raise ValueError(f"{path} is not a file.")
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as err:
        raise ValueError(f"cannot read {path}: {err.strerror or err}.") from None
    if head.startswith(b"SQLite format 3"):
        rows = read_results(path)  # StoreError is a ValueError
        if not rows:
            raise ValueError(f"{path} holds no finished cell yet.")
        return build_map(rows)
    if head.lstrip()[:1] in (b"{", b"["):
        return read_map(path)
    raise ValueError(f"{path} is neither a sweep's results file (SQLite) nor a map (JSON).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.sweep.report",
        description="Which g where: the map of a sweep (winner per point, ties, margins).",
    )
    parser.add_argument("results", help="a sweep's .sqlite results file, or a map .json")
    parser.add_argument(
        "--html", type=output_file, help="write the self-contained HTML report here"
    )
    parser.add_argument("--json", type=output_file, help="write the map document here")
    args = parser.parse_args(argv)
    try:
        doc = load_map(Path(args.results))
    except (StoreError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(map_text(doc))
    try:
        if args.json:
            write_map(doc, Path(args.json))
            print(f"\nmap written to {args.json}")
        if args.html:
            write_text(args.html, map_html(doc, Path(args.results).name))
            print(f"report written to {args.html}")
    except OSError as err:
        print(f"error: cannot write the map: {err.strerror or err}.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.sweep.report"))
