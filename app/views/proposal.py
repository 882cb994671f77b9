"""View 2, Proposal: where each sampler wants to flip next, for one chain (the teaching view).

A locally balanced sampler proposes flipping site i with probability Q(i | x) ∝ g(t_i), where
t_i = p(x with i flipped) / p(x). The heat maps show log10 Q (or the flip probability
T = Q·A, or the acceptance A) over the lattice; the uninformed baselines are flat. After Step,
the maps are those seen just before the step and a marker shows the proposed site (accepted or
rejected). Block samplers (a sweep per step) propose no single site: they are named in a caption
instead.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts, presentation
from app.page_state import ensure, ensure_in_range
from app.state import SiteStep, proposes_one_site
from lsbcore import REGISTRY
from lsbcore.studies.figures import sampler_label as label

QUANTITIES = {
    "Q": "proposal Q(i | x)",
    "T": "flip probability T(x → xᵢ) = Q·A",
    "A": "acceptance A if i is proposed",
}
MAX_SIDE = 96  # larger lattices are shown in blocks (probabilities summed per block)
CELL_PX = 160  # on-screen width of one sampler's pair of maps: 5 fit at 1600 px, 2 at 800
LECTURE_PX = 230  # a pair's height in presentation mode: whole on a 720-line screen
LOG_RANGE = 8.0  # decades shown below the largest value
LIVE_S = 0.5  # while running, the maps are recomputed at most this often


def _pool(values: np.ndarray, factor: int, how: str) -> np.ndarray:
    if factor <= 1:
        return values
    h, w = values.shape
    ph, pw = -h % factor, -w % factor
    padded = np.pad(values, ((0, ph), (0, pw)), constant_values=np.nan if how == "mean" else 0.0)
    blocks = padded.reshape(padded.shape[0] // factor, factor, padded.shape[1] // factor, factor)
    return np.nanmean(blocks, axis=(1, 3)) if how == "mean" else blocks.sum(axis=(1, 3))


def quantity_map(step: SiteStep, quantity: str, factor: int = 1) -> np.ndarray:
    """The map shown for one sampler: log10 Q, log10 T or A, pooled into ``factor`` blocks."""
    q = _pool(np.asarray(step.q, dtype=np.float64), factor, "sum")
    t = _pool(np.asarray(step.t, dtype=np.float64), factor, "sum")
    with np.errstate(divide="ignore", invalid="ignore"):
        if quantity == "A":
            return np.where(q > 0, t / q, np.nan)
        values = q if quantity == "Q" else t
        return np.where(values > 0, np.log10(values), np.nan)


def _drawable(maps: dict[str, SiteStep]) -> dict[str, SiteStep]:
    return {n: m for n, m in maps.items() if np.asarray(m.q).ndim == 2 and np.asarray(m.q).size}


def _z_range(values: dict[str, np.ndarray], quantity: str) -> tuple[float, float]:
    """The colour scale shared by every sampler's map: A on [0, 1]; log10 Q or T over the
    ``LOG_RANGE`` decades below the largest value."""
    if quantity == "A":
        return 0.0, 1.0
    finite = [v[np.isfinite(v)] for v in values.values()]
    finite = np.concatenate(finite) if finite else np.zeros(0)
    zmax = float(finite.max()) if finite.size else 0.0
    zmin = max(float(finite.min()) if finite.size else -1.0, zmax - LOG_RANGE)
    return min(zmin, zmax - 1e-3), zmax


def proposal_figures(maps: dict[str, SiteStep], quantity: str = "Q") -> list[tuple]:
    """``(name, figure)`` per sampler: its state above its map, ``CELL_PX`` wide, all on one
    colour scale (drawn once, by ``scale_figure``). The page sets them in a row that wraps, so
    a narrow screen shows fewer per row instead of shrinking every map."""
    maps = _drawable(maps)
    if not maps:
        return []
    factor = _pool_factor(maps)
    z_range = _z_range({n: quantity_map(m, quantity, factor) for n, m in maps.items()}, quantity)
    out = []
    for name, step in maps.items():
        fig = proposal_figure({name: step}, quantity, z_range=z_range, colorbar=False)
        fig.update_layout(width=CELL_PX, height=2 * CELL_PX + 30)
        out.append((name, fig))
    return out


def scale_figure(quantity: str, z_range: tuple[float, float]) -> go.Figure:
    """The maps' shared colour scale as a strip of its own (a cell of the same row): every map
    cell keeps one size, and the scale reads the same at any font size."""
    low, high = z_range
    values = np.linspace(low, high, 128)
    title = "A" if quantity == "A" else f"log10 {quantity}"
    fig = go.Figure(
        go.Heatmap(
            z=[values], x=values, coloraxis="coloraxis", hovertemplate="%{x:.3g}<extra></extra>"
        )
    )
    fig.update_layout(
        coloraxis={"colorscale": "Viridis", "cmin": low, "cmax": high, "showscale": False},
        xaxis={"title": {"text": title}, "ticks": "outside"},
        yaxis={"visible": False},
        width=2 * CELL_PX,
        height=110,
        margin={"l": 10, "r": 10, "t": 10, "b": 60},
    )
    return fig


def shared_range(maps: dict[str, SiteStep], quantity: str) -> tuple[float, float] | None:
    """The colour scale ``proposal_figures`` uses for ``maps`` (None when nothing is drawn)."""
    maps = _drawable(maps)
    if not maps:
        return None
    factor = _pool_factor(maps)
    return _z_range({n: quantity_map(m, quantity, factor) for n, m in maps.items()}, quantity)


def _pool_factor(maps: dict[str, SiteStep]) -> int:
    shape = np.asarray(next(iter(maps.values())).q).shape
    return max(1, math.ceil(max(shape) / MAX_SIDE))


def proposal_figure(
    maps: dict[str, SiteStep],
    quantity: str = "Q",
    z_range: tuple[float, float] | None = None,
    colorbar: bool = True,
) -> go.Figure | None:
    """State (top) and the chosen quantity (bottom) for each sampler, one column each.
    ``z_range``: the colour scale (default: from these maps)."""
    maps = _drawable(maps)
    if not maps:
        return None
    names = list(maps)
    factor = _pool_factor(maps)
    values = {n: quantity_map(maps[n], quantity, factor) for n in names}
    zmin, zmax = z_range or _z_range(values, quantity)
    title = "A" if quantity == "A" else f"log10 {quantity}"
    # one figure, two rows of square panels, built in one go (incremental plotly updates
    # cost far more than the data here)
    n, gap = len(names), 0.02
    width = (1.0 - gap * (n - 1)) / n
    traces, layout = [], {}
    for k, name in enumerate(names):
        x0 = k * (width + gap)
        for row, (z, kind) in enumerate(((maps[name].state, "state"), (values[name], title))):
            axis = 2 * k + row + 1
            xa, ya = f"x{axis}", f"y{axis}"
            layout[f"xaxis{axis}"] = {"domain": [x0, x0 + width], "visible": False}
            layout[f"yaxis{axis}"] = {
                "domain": [0.52, 1.0] if row == 0 else [0.0, 0.48],
                "visible": False,
                "autorange": "reversed",
                "scaleanchor": xa,
            }
            if row == 0:
                state = _pool(np.asarray(z, dtype=np.float64), factor, "mean")
                traces.append(
                    {
                        "type": "heatmap",
                        "z": state,
                        "zmin": -1,
                        "zmax": 1,
                        "colorscale": [[0, "black"], [1, "white"]],
                        "showscale": False,
                        "xaxis": xa,
                        "yaxis": ya,
                        "hovertemplate": "row %{y}, col %{x}<br>x = %{z:.0f}<extra>state</extra>",
                    }
                )
            else:
                traces.append(
                    {
                        "type": "heatmap",
                        "z": z,
                        "coloraxis": "coloraxis",
                        "xaxis": xa,
                        "yaxis": ya,
                        "hovertemplate": f"row %{{y}}, col %{{x}}<br>{kind} = %{{z:.3g}}"
                        "<extra></extra>",
                    }
                )
            site = maps[name].site
            accepted = maps[name].accepted
            if site is not None:
                traces.append(
                    {
                        "type": "scatter",
                        "x": [site[1] // factor],
                        "y": [site[0] // factor],
                        "mode": "markers",
                        "marker": {
                            "symbol": "square-open" if accepted is not False else "x-open",
                            "size": 14,
                            "color": "#e8322d" if accepted is not False else "#444444",
                            "line": {"width": 3},
                        },
                        "showlegend": False,
                        "xaxis": xa,
                        "yaxis": ya,
                        "hovertemplate": (
                            "proposed site: "
                            + ("rejected" if accepted is False else "accepted")
                            + "<extra></extra>"
                        ),
                    }
                )
    annotations = [
        {
            "text": label(name),
            "x": k * (width + gap) + width / 2,
            "y": 1.0,
            "xref": "paper",
            "yref": "paper",
            "xanchor": "center",
            "yanchor": "bottom",
            "showarrow": False,
        }
        for k, name in enumerate(names)
    ]
    layout.update(
        coloraxis={
            "colorscale": "Viridis",
            "cmin": zmin,
            "cmax": zmax,
            "colorbar": {"title": title},
            "showscale": colorbar,
        },
        annotations=annotations,
        height=int(min(900, 70 + 2 * 0.95 * 1000 / max(n, 2))),  # square panels ~1000 px wide
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
    )
    return go.Figure(data=traces, layout=layout)


def step_rows(maps: dict[str, SiteStep], after_step: bool = True) -> list[dict]:
    """One table row per sampler: how likely a move is and, after a step, where it moved and
    with which acceptance."""
    rows = []
    for name, m in maps.items():
        if m.q is None:  # a block sampler: no proposal to tabulate
            continue
        q = np.asarray(m.q)
        uniform = q.size > 0 and float(q.max() - q.min()) <= 1e-12 * max(float(q.max()), 1e-300)
        row = {"sampler": label(name)}
        if after_step:
            row["proposed site (row, col)"] = None if m.site is None else str(m.site)
            row["A at that site"] = None if m.accept_prob is None else round(m.accept_prob, 4)
            row["outcome"] = (
                None if m.accepted is None else ("accepted" if m.accepted else "rejected")
            )
        row.update(
            {
                "P(move) = Σ T": round(m.move_prob, 4),
                "largest Q": float(q.max()) if q.size else None,
                "proposal": "uniform" if uniform else "informed",
            }
        )
        rows.append(row)
    return rows


def current_maps(run, chain: int) -> dict[str, SiteStep]:
    """Q and T for chain ``chain`` of every sampler at the current state (no step taken)."""
    out = {}
    with run.lock:
        for name, s in run.comparison.samplers.items():
            if not proposes_one_site(name):
                continue
            q = np.exp(s.proposal_log_probs()[chain].cpu().numpy())
            t = s.flip_probabilities()[chain].cpu().numpy()
            out[name] = SiteStep(s.x[chain].cpu().numpy().copy(), q, t, None, None, float(t.sum()))
    return out


def intro(names) -> str:
    """What the maps show; the uninformed baselines are mentioned only when the run has one."""
    flat = any(REGISTRY[n].family == "uninformed" for n in names)
    return (
        "Each step proposes flipping **one** site *i* with probability "
        "Q(i | x) ∝ g(tᵢ), where tᵢ = p(x with i flipped) / p(x), and accepts with "
        "A = min(1, Z(x)/Z(x′)), Z(x) = Σⱼ g(tⱼ). Bright sites are the likely proposals: "
        "informed samplers concentrate on the boundary of the object"
        + (", the uninformed baselines are flat. " if flat else ". ")
        + "Press **Step** (or S) to watch one step in slow motion."
    )


def render(run) -> None:
    if not presentation.is_on():  # a lecture's screen: the maps first, the intro under them
        st.markdown(intro(run.comparison.names))
    chains = run.config.chains
    lecture = presentation.is_on()
    shown = "collapsed" if lecture else "visible"  # a lecture's screen: room for the maps
    left, right = st.columns([1, 3])
    with left:
        ensure_in_range("proposal_chain", 1, 1, chains)
        number = st.number_input(
            "Chain", 1, chains, step=1, key="proposal_chain", label_visibility=shown
        )
        chain = number - 1
    with right:
        ensure("proposal_quantity", "Q", lambda v: v in QUANTITIES)
        quantity = st.radio(
            "Show",
            list(QUANTITIES),
            format_func=QUANTITIES.get,
            horizontal=True,
            key="proposal_quantity",
            label_visibility=shown,
        )
    report = run.last_step
    after_step = report is not None and report.step == run.n_steps and report.chain == chain
    blocks = [n for n in run.comparison.names if not proposes_one_site(n)]
    if after_step:
        maps = {n: m for n, m in report.sites.items() if m.q is not None}
        moved = sum(bool(m.accepted) for m in maps.values())
        note = (
            f"Step {report.step:,} ({'burn-in' if report.phase == 'burnin' else 'mixing'}), "
            f"chain {chain + 1}: maps just before the step. The marker is the proposed site: a "
            f"red square if the proposal was accepted, a grey cross if it was rejected "
            f"({moved} of {len(maps)} samplers moved)."
        )
    else:  # while running, the maps follow twice a second: Q over all sites costs O(B D)
        maps = run.throttled("proposal", lambda: current_maps(run, chain), (chain,), LIVE_S)
        note = f"Chain {chain + 1} at step {run.n_steps:,}."
    notes = [note] + ([block_note(blocks, report.sites if after_step else None)] if blocks else [])
    for text in notes if not lecture else []:
        st.caption(text)
    if not maps:
        for text in notes if lecture else []:
            st.caption(text)
        return
    with st.container(horizontal=True, gap="small"):  # the maps wrap on a narrow page
        for name, fig in proposal_figures(maps, quantity):
            charts.show(
                fig, run, f"proposal-{quantity}-{name}", width="content", max_height=LECTURE_PX
            )
        z_range = shared_range(maps, quantity)
        if z_range is not None:
            charts.show(scale_figure(quantity, z_range), run, "proposal-scale", width="content")
    st.dataframe(step_rows(maps, after_step), hide_index=True)
    if lecture:  # under the maps
        for text in notes:
            st.caption(text)
        st.markdown(intro(run.comparison.names))


def block_note(names: list[str], sites: dict[str, SiteStep] | None = None) -> str:
    """Why block samplers are not drawn here, and (after a step) how many sites each changed."""
    parts = []
    for name in names:
        m = (sites or {}).get(name)
        flipped = "" if m is None or m.flipped is None else f" ({m.flipped:,} sites changed)"
        parts.append(f"{label(name)}{flipped}")
    return (
        f"Not shown: {', '.join(parts)}. A block sampler updates every site in one step (a "
        "sweep) from its conditional, so it proposes no single site to map."
    )
