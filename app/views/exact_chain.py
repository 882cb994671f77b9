"""The exact chain: on a tiny problem (at most 12 sites) every state is enumerated, each
sampler's full transition matrix built, and its spectral gap and exact distance to the target
against steps shown side by side: how the choice of g changes the speed of convergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import page_state, tables, view_params
from app.text import grid_size
from lsbcore import REGISTRY, exact
from lsbcore.number_text import number_text
from lsbcore.studies import figures
from lsbcore.studies.figures import sampler_label as label

GAP_MEANING = (
    "The spectral gap is how much of the distance to the target one step removes at worst in "
    "the long run (it shrinks like (1 − gap)^t), so 1/gap, the relaxation time, counts the "
    "steps per factor e; a bigger gap means faster mixing."
)


START_CAPTION = (
    "Start: a point mass at the least likely state. A checkerboard step is a sweep of every "
    "site; compare it with the others in site updates. Steps to TV ≤ 1/4: the mixing time "
    "from that start."
)


@dataclass(frozen=True)
class ExactView:
    """What the view draws: the table rows, the figure, and a note (or only a message)."""

    rows: list[dict]
    figure: go.Figure | None
    message: str = ""
    note: str = ""  # why a start takes many relaxation times (``start_note``), if it does


def exact_names(names, balancings: dict | None = None) -> list[str]:
    """The samplers among ``names`` that have an exact matrix here (the imported ``learned``
    function only when it is given; not the flow samplers, whose flow is trained on the run's
    posterior, not on the window)."""
    balancings = balancings or {}
    return [
        n
        for n in names
        if n in REGISTRY
        and not REGISTRY[n].takes_flow
        and (not REGISTRY[n].needs_balancing or n in balancings)
    ]


#: Below this a float64 TV is rounding noise (the distances sum 2^n terms of ~1e-16 each).
TV_FLOOR = 1e-12


def table(rows: list[dict]) -> list[dict]:
    """The comparison as display rows (the curves left out), numbers as text with three
    significant digits: a TV of 6e-16 is rounding noise and reads "< 1e-12"."""
    return [
        {
            "sampler": label(row["name"]),
            "spectral gap": number_text(row["gap"], floor=TV_FLOOR),
            "relaxation time (steps)": number_text(row["relaxation_time"]),
            "relaxation time (site updates)": number_text(row["relaxation_site_updates"]),
            "steps to TV ≤ 1/4": _mixing_text(row),
            "TV after the last step": number_text(row["tv_final"], floor=TV_FLOOR),
        }
        for row in rows
    ]


def _mixing_text(row: dict) -> str:
    steps = row["mixing_steps"]
    return f"> {len(row['tv']) - 1:,}" if steps is None else f"{steps:,}"


# a start is "slow" when its distance takes this many relaxation times to fall below 1/4
SLOW_START = 4.0


def start_note(target, rows: list[dict]) -> str:
    """A sentence when some sampler's distance from the least likely state takes many times its
    relaxation time to fall below 1/4 (a strong field: a gap near 1, yet 9 steps on 3 x 3), and
    why: the gap is the long-run rate near the target, and a sampler first has to walk from the
    start to where the mass is, a step per site it flips. Empty otherwise."""
    slow = [
        row
        for row in rows
        if row["mixing_steps"] is not None
        and row["mixing_steps"] >= SLOW_START * row["relaxation_time"]
    ]
    if not slow:
        return ""
    pi = exact.exact_distribution(target)
    states = exact.all_states(target.n_sites)
    start, mode = int(np.argmin(pi)), int(np.argmax(pi))
    flips = int((states[start] != states[mode]).sum())
    # "100%" would hide how near 1 it is: the rest of a saturated window's mass is 1e-20 or so
    rest = float(np.delete(pi, mode).sum())  # not 1 - pi[mode], which rounds to 0
    share = f"{1 - rest:.0%} of the mass" if rest > 0.005 else f"all but {rest:.1g} of the mass"
    listed = "; ".join(
        f"{label(row['name'])}: {row['mixing_steps']:,} steps, relaxation time "
        f"{number_text(row['relaxation_time'])}"
        for row in slow
    )
    return (
        f"From the least likely state the distance falls below 1/4 far later than the "
        f"relaxation time suggests ({listed}). The gap is the rate once the chain is near the "
        f"target; from this start it first has to get there: the likeliest state holds "
        f"{share} and is {flips} flips away, and a sampler that flips one "
        "site a step needs at least one step per flip."
    )


def exact_view(target, names, steps: int = 200, start="least likely", balancings=None):
    """The table and figure for ``target`` (chain 0's field when there is one per chain), or
    only a message when the problem is too large or no sampler fits."""
    if target.n_sites > exact.MAX_SITES:
        return ExactView(
            [],
            None,
            f"The exact chain enumerates all 2^n states, so it needs at most {exact.MAX_SITES} "
            f"sites; this problem has {target.n_sites:,}. Choose a lattice of at most 3 x 4.",
        )
    if target.batch > 1:
        target = target.chain(0)
    names = exact_names(names, balancings)
    if not names:
        return ExactView([], None, "Choose at least one sampler to compare.")
    rows = exact.compare_samplers(target, names, steps, start, balancings)
    curves = {row["name"]: row["tv"] for row in rows}
    return ExactView(rows, figures.exact_tv_figure(curves), note=start_note(target, rows))


def render(target, names, balancings: dict | None = None, steps: int = 200) -> None:
    """Streamlit: the gap table and the TV figure for ``names`` on ``target``."""
    if target.n_sites > exact.MAX_SITES:  # checked before any work, so no traceback
        st.info(exact_view(target, names).message)
        return
    with st.spinner("Building every sampler's transition matrix…"):
        view = exact_view(target, names, steps, balancings=balancings)
    if view.message:
        st.info(view.message)
        return
    st.caption(GAP_MEANING)
    if target.batch > 1:
        st.caption("Each chain has its own field here; this is the chain of chain 0.")
    tables.dataframe(table(view.rows), hide_index=True)
    st.caption(START_CAPTION)
    if view.note:
        st.caption(view.note)
    st.plotly_chart(view.figure, config={"displayModeBar": False})


# ----------------------------------------------------------------------------- in the app
# label (width x height) -> (rows, columns)
WINDOWS = view_params.EXACT_WINDOWS
CACHE_KEY = "exact_chain"
PARAMS = view_params.EXACT_CHAIN  # the tab's link parameter (app/view_params.py)
KEYS = tuple(param.key for param in PARAMS)
# the coupling sweep: 9 values of lambda, on at most 9 sites (a 3 x 4 window takes ~5 s a matrix)
SWEEP_POINTS = 9
SWEEP_SITES = 9
# a sampler "slows down" when its relaxation time grows tenfold over the sweep, "stays fast"
# when it grows less than threefold (between the two the text says only the numbers)
SLOW_FACTOR = 10.0
FAST_FACTOR = 3.0
RELAXATION_MEANING = (
    "Relaxation time: site updates per factor e of the distance to the target, at worst. How it "
    "grows with λ depends on the window's field. Where the data do not decide the window (a weak "
    "field), the posterior at large λ has two smooth modes separated by states that break many "
    "edges; every local sampler, block Gibbs included, must pass through them and slows down "
    "about exponentially (Tempering, its own tab, is the remedy). Where the field is strong, "
    "one mode dominates at every λ, and what slows down is the balancing function itself."
)


def relaxation_text(lams, curves: dict[str, np.ndarray]) -> str:
    """What the relaxation chart shows, in numbers: each sampler's relaxation time at the
    first and last λ of the sweep, and which samplers slow down (tenfold or more from their
    fastest) and which stay fast (less than threefold). Built from the curves, so the text
    never claims what the chart does not show."""
    lams = np.asarray(lams, dtype=np.float64)
    parts, slow, fast = [], [], []
    for name, values in curves.items():
        values = np.asarray(values, dtype=np.float64)
        ok = np.isfinite(values) & (values > 0)
        if not ok.any():
            continue
        growth = values[-1] / values[ok].min() if ok[-1] else np.inf
        parts.append(
            f"{label(name)} {number_text(values[0])} → {number_text(values[-1])}"
            + (f" (×{number_text(growth, 2)})" if growth >= FAST_FACTOR else "")
        )
        if growth >= SLOW_FACTOR:
            slow.append(label(name))
        elif growth < FAST_FACTOR:
            fast.append(label(name))
    if not parts:
        return ""
    text = (
        f"From λ = {number_text(lams[0])} to {number_text(lams[-1])}, in site updates: "
        + "; ".join(parts)
        + ". "
    )
    if len(slow) == len(parts):
        return text + (
            "Every sampler slows down tenfold or more, as a posterior with two modes at large λ "
            "makes every local sampler do; the choice of g moves the curve more than its slope."
        )
    if slow:
        stay = (
            f", {_names(fast)} stay{'s' if len(fast) == 1 else ''} within threefold" if fast else ""
        )
        return text + (
            f"{_names(slow)} slow{'s' if len(slow) == 1 else ''} down tenfold or more"
            + stay
            + "; the window and λ are the same for all, so the difference lies in the samplers."
        )
    return text + "No sampler slows down tenfold here."


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def coupling_sweep(target, names, balancings=None, points: int = SWEEP_POINTS):
    """The window's relaxation times for ``points`` values of lambda from 0 to
    ``max(1.5, 2 lambda)`` (the run's lambda among them), on at most ``SWEEP_SITES`` sites
    (the centre 3 x 3 of a larger window). Returns ``(lambdas, curves, target used)``."""
    rows, cols = target.shape
    if rows * cols > SWEEP_SITES:
        target = window_target(target, min(rows, 3), min(cols, 3))
    top = max(1.5, 2.0 * target.lam)
    lams = np.unique(np.append(np.linspace(0.0, top, points), target.lam))
    field = target.alpha[0]
    family = [type(target)(field, float(lam), "free") for lam in lams]
    return lams, exact.relaxation_along(family, names, balancings), target


def window_target(target, rows: int, cols: int):
    """The Ising posterior of the ``rows x cols`` window at the centre of chain 0's lattice,
    free boundary (a window has no wrap-around), same lambda; None for other targets."""
    alpha, lam = getattr(target, "alpha", None), getattr(target, "lam", None)
    if alpha is None or lam is None:
        return None
    field = alpha[0] if alpha.dim() == 3 else alpha
    height, width = field.shape
    if rows > height or cols > width:
        return None
    top, left = (height - rows) // 2, (width - cols) // 2
    window = field[top : top + rows, left : left + cols].clone()
    return type(target)(window, lam, "free")


def render_run(run) -> None:
    """The Exact chain tab: the run's posterior on a window small enough to enumerate, and
    every selected sampler's exact matrix there (the learned ones as they are now)."""
    from app import charts

    st.caption(
        "Every state of a small window of this posterior is enumerated, so each sampler's "
        "transition matrix is exact: no sampling noise in the gap or the distance to the target."
    )
    page_state.restore_links(KEYS)
    choice = st.radio("Window", list(WINDOWS), horizontal=True, key="exact_window")
    page_state.remember_links(KEYS)
    rows, cols = WINDOWS[choice]
    target = window_target(run.problem.target, rows, cols)
    if target is None:
        st.info("The exact chain is drawn for Ising posteriors at least as large as the window.")
        return
    comparison = run.comparison
    learned = {n: comparison[n].balancing for n in comparison.names if REGISTRY[n].needs_balancing}
    learned.update({n: comparison[n].balancing for n in comparison.names if REGISTRY[n].learnable})
    cached = run.cache.get(CACHE_KEY)
    fresh = cached is not None and cached[0] == (choice, tuple(comparison.names))
    if st.button("Compute" if not fresh else "Compute again", key="exact_compute"):
        with st.spinner("Building every sampler's transition matrix…"), run.lock:
            view = exact_view(target, comparison.names, balancings=learned)
            names = exact_names(comparison.names, learned)
            sweep = coupling_sweep(target, names, learned) if names else None
        run.cache[CACHE_KEY] = ((choice, tuple(comparison.names)), run.n_steps, view, sweep)
        cached, fresh = run.cache[CACHE_KEY], True
    if not fresh:
        wait = "a second or two" if rows * cols <= 9 else "a few seconds"  # 3 x 4: 3-6 s, 2 cores
        st.caption(f"Press Compute: {2 ** (rows * cols):,} states, about {wait}.")
        return
    _, step, view, sweep = cached
    if view.message:
        st.info(view.message)
        return
    learners = [label(n) for n in learned if n in comparison.names]
    st.caption(
        f"The centre {choice} window of chain 1's α, λ = {target.lam:g}, free boundary; "
        f"computed at step {step:,}"
        + (f" with {', '.join(learners)} as learned then." if learners else ".")
    )
    st.caption(GAP_MEANING)
    tables.dataframe(table(view.rows), hide_index=True)
    st.caption(START_CAPTION)
    if view.note:
        st.caption(view.note)
    charts.show(view.figure, run, "exact-chain-tv")
    if sweep is not None:
        lams, curves, used = sweep
        st.subheader("Relaxation time against the coupling λ")
        st.caption(RELAXATION_MEANING)
        st.markdown(relaxation_text(lams, curves))
        charts.show(
            figures.exact_relaxation_figure(lams, curves, current=used.lam),
            run,
            "exact-chain-relaxation",
        )
        rows_used, cols_used = used.shape
        st.caption(
            f"The {grid_size(rows_used, cols_used)} window's field under λ from 0 to {lams[-1]:g}; "
            "relaxation time in site updates (a block Gibbs sweep counts one per site)."
        )
