"""MAP (annealing): the run's posterior annealed to near zero temperature by each chosen
sampler, against the exact MAP of a minimum cut: energy against sweeps, the gap to the
optimum per sampler, and the annealed and exact MAPs side by side. Computed on request.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import page_state, view_params
from app.text import grid_size
from app.views import pixels
from lsbcore import REGISTRY
from lsbcore.annealing import (
    AnnealingResult,
    MapGap,
    Schedule,
    anneal,
    compare_with_map,
    map_states,
    time_to_gap,
)
from lsbcore.samplers.registry import sweep_steps
from lsbcore.studies import figures
from lsbcore.studies.figures import sampler_label as label

CACHE_KEY = "annealing"
CHAINS = 4  # chains per sampler: the best of them is compared with the MAP
BLOCK = "checkerboard"
TOLERANCE = 1e-3  # the "within 0.1%"
# Work per sampler, in site updates of all its chains (sites x sweeps x chains): about 3 s of
# single-site steps or of block sweeps on one core. A larger lattice is annealed on its
# centre window, the same for every sampler so that they compare.
BUDGET = {"site": 4e6, "block": 4e6, "sweep": 6e7}  # by the samplers' kind of move
MIN_SIDE = 8
CHOICES = {
    "both": "the run's samplers and block Gibbs",
    "run": "the run's samplers",
    "block": "block Gibbs only",
}
PARAMS = view_params.ANNEALING  # the tab's link parameters (app/view_params.py)
KEYS = tuple(param.key for param in PARAMS)

ENERGY_MEANING = (
    "The energy is E(x) = −log p̃(x) under the posterior itself (not the tempered one), so "
    "stages compare: lower is more probable, and nothing can go below the dashed line, the "
    "exact MAP's energy from the minimum cut. Solid: the lowest energy any of the "
    f"{CHAINS} chains has reached so far; dotted: the current energy of the chain that ended "
    "best (it fluctuates while the temperature is high and freezes as β grows). The lower "
    "panel is the relative gap (E − E_MAP)/|E_MAP| on a log scale; a line stops where it "
    "reaches the optimum exactly (a gap of 0 has no place on a log axis). A block Gibbs sweep "
    "and a sweep of single-site steps (one step per site) are one unit on the x axis."
)
TABLE_MEANING = (
    "Per sampler, the best of its chains: the relative gap of its lowest energy to the exact "
    "optimum (0 = the MAP's energy exactly), the share of sites that agree with the exact MAP "
    "(below 100% at gap 0 only when several states tie), the sweeps and seconds it took to "
    "come within 0.1% of the optimum, and the whole schedule's wall time (times include the "
    "page's other work, such as a running run)."
)
IMAGES_MEANING = (
    "White = +1 (object), black = −1 (background). First the exact MAP by the minimum cut "
    "(Greig, Porteous and Seheult 1989): the most probable state, found exactly in well under "
    "a second. Then each sampler's annealed MAP (its best chain), with the sites where it "
    "differs from the exact one in red."
)


@dataclass(frozen=True)
class AnnealView:
    """What the tab draws, or only a message."""

    results: dict[str, AnnealingResult] = field(default_factory=dict)
    gaps: dict[str, MapGap] = field(default_factory=dict)
    map_state: np.ndarray | None = None  # [H, W] the exact MAP
    figure: go.Figure | None = None
    window: str = ""  # how the run's posterior was cut down, if it was
    message: str = ""


def anneal_names(run_names, choice: str) -> list[str]:
    """The samplers to anneal for ``choice`` (a key of ``CHOICES``), in the run's order (not
    the flow samplers: their flow is trained on the run's posterior, not on a cooled one)."""
    run_names = [n for n in run_names if not REGISTRY[n].takes_flow]
    names = list(run_names) if choice in ("run", "both") else []
    if choice in ("block", "both") and BLOCK not in names:
        names.append(BLOCK)
    return names


def window_shape(shape, names, total_sweeps: int) -> tuple[int, int]:
    """The largest centred window (the lattice's aspect, at least ``MIN_SIDE`` a side) whose
    annealing stays within ``BUDGET`` for the most expensive of ``names``."""
    height, width = shape
    kinds = {REGISTRY[n].move for n in names}
    budget = min(BUDGET[k] for k in kinds) if kinds else BUDGET["sweep"]
    sites = budget / (total_sweeps * CHAINS)
    if height * width <= sites:
        return height, width
    scale = math.sqrt(sites / (height * width))
    return (
        min(height, max(MIN_SIDE, int(height * scale))),
        min(width, max(MIN_SIDE, int(width * scale))),
    )


def chain_zero_window(target, rows: int, cols: int):
    """Chain 0's Ising posterior on the centre ``rows x cols`` window (free boundary when cut:
    a window has no wrap-around), same lambda."""
    field_ = target.alpha[0] if target.alpha.dim() == 3 else target.alpha
    height, width = field_.shape
    if (rows, cols) == (height, width):
        return type(target)(field_.clone(), target.lam, target.boundary)
    top, left = (height - rows) // 2, (width - cols) // 2
    window = field_[top : top + rows, left : left + cols].clone()
    return type(target)(window, target.lam, "free")


def energy_curves(results: dict[str, AnnealingResult]) -> dict[str, dict[str, np.ndarray]]:
    """Per sampler: sweeps, the lowest energy over chains so far, the best chain's energy."""
    curves = {}
    for name, result in results.items():
        curves[name] = {
            "sweeps": result.sweeps,
            "lowest": result.best_energy.min(axis=1),
            "current": result.energy[:, result.best_chain],
        }
    return curves


def annealing_view(
    target, names, schedule: Schedule, seed: int = 0, balancings=None, polish: bool = False
) -> AnnealView:
    """Anneal ``target`` (one field) with each of ``names`` and compare with the exact MAP."""
    balancings = balancings or {}
    if not names:
        return AnnealView(message="Choose at least one sampler to anneal.")
    x_map = map_states(target)
    results, gaps = {}, {}
    for name in names:
        result = anneal(
            target, name, schedule_for(name, schedule, target), CHAINS, seed,
            balancing=balancings.get(name), polish=polish,
        )  # fmt: skip
        results[name] = result
        gaps[name] = compare_with_map(result, target, x_map)
    exact_energy = next(iter(gaps.values())).exact_energy
    figure = figures.annealing_energy_figure(energy_curves(results), exact_energy)
    return AnnealView(results, gaps, x_map[0].numpy(), figure)


def schedule_for(name: str, schedule: Schedule, target) -> Schedule:
    """``schedule`` (in sweeps per stage) in ``name``'s steps: a single-site step is one site
    update, so a sweep is ``n_sites`` steps (``sweep_steps``)."""
    per_sweep = sweep_steps(name, target)
    if per_sweep == 1:
        return schedule
    return Schedule(
        schedule.kind, schedule.beta_0, schedule.beta_max, schedule.n_stages,
        schedule.steps_per_stage * per_sweep,
    )  # fmt: skip


def table(view: AnnealView) -> list[dict]:
    rows = []
    for name, result in view.results.items():
        gap = view.gaps[name]
        near = time_to_gap(result, gap.exact_energy, TOLERANCE)
        rows.append(
            {
                "sampler": label(name),
                "relative gap": gap.relative_gap,
                "lowest energy": gap.best_energy,
                "exact MAP energy": gap.exact_energy,
                "sites agreeing": gap.agreement,
                "sweeps to 0.1%": None if near is None else near[2],
                "seconds to 0.1%": None if near is None else near[0],
                "seconds": result.wall_seconds,
            }
        )
    return rows


def map_images(view: AnnealView, side: int = 200) -> list[tuple[np.ndarray, str]]:
    """The exact MAP, then each sampler's best state with its differences in red."""
    images = [(pixels.fit(pixels.spins(view.map_state), side), "Exact MAP (minimum cut)")]
    for name, result in view.results.items():
        gap = view.gaps[name]
        state = result.best_state[gap.chain].numpy()
        rgb = pixels.to_rgb(pixels.spins(state))
        wrong = state != view.map_state
        rgb[wrong] = (230, 50, 40)
        n_wrong = int(wrong.sum())
        caption = f"{label(name)}: " + (
            "equal to the exact MAP" if n_wrong == 0 else f"{n_wrong:,} sites differ (red)"
        )
        images.append((pixels.fit(rgb, side), caption))
    return images


# ----------------------------------------------------------------------------- in the app
def _controls(run_names) -> dict:
    page_state.restore_links(KEYS)
    params = {param.key: param for param in PARAMS}
    st.radio(
        params["anneal_samplers"].label,
        list(CHOICES),
        format_func=CHOICES.get,
        horizontal=True,
        key="anneal_samplers",
        help=f"The run's samplers are {', '.join(label(n) for n in run_names)}.",
    )
    cols = st.columns(5)
    cols[0].radio(
        params["anneal_kind"].label, ["geometric", "linear"], key="anneal_kind",
        help="Geometric: equal ratios between stages' β; linear: equal steps in β.",
    )  # fmt: skip
    for col, key, step, fmt in (
        (cols[1], "anneal_beta_0", 0.1, "%.2f"),
        (cols[2], "anneal_beta_max", 10.0, "%.0f"),
        (cols[3], "anneal_stages", 1, "%d"),
        (cols[4], "anneal_sweeps", 1, "%d"),
    ):
        param = params[key]
        whole = isinstance(param.default, int)
        col.number_input(
            param.label,
            min_value=int(param.low) if whole else float(param.low),
            max_value=int(param.high) if whole else float(param.high),
            step=step,
            format=fmt,
            key=key,
        )
    st.checkbox(
        params["anneal_polish"].label, key="anneal_polish",
        help="End with zero-temperature sweeps: flip every site whose flip raises log p̃ "
        "until none does (a local maximum; it cannot cross to a better mode).",
    )  # fmt: skip
    values = page_state.remember_links(KEYS)
    return values


def render_run(run) -> None:
    """The MAP (annealing) tab for the run's posterior (chain 0's field)."""
    from app import charts

    st.caption(
        "Simulated annealing samples p̃^β while the inverse temperature β grows: at β = 1 the "
        "posterior itself, as β → ∞ only its most probable state. Each chosen sampler is "
        "annealed here and compared with the exact MAP, which for this posterior a minimum cut "
        "finds exactly: where annealing falls short is visible to the site."
    )
    comparison = run.comparison
    values = _controls(comparison.names)
    target = run.problem.target
    if getattr(target, "alpha", None) is None:
        st.info("Annealing is drawn here for Ising posteriors.")
        return
    names = anneal_names(comparison.names, values["anneal_samplers"])
    try:
        schedule = Schedule(
            values["anneal_kind"], values["anneal_beta_0"], values["anneal_beta_max"],
            values["anneal_stages"], values["anneal_sweeps"],
        )  # fmt: skip
    except ValueError as err:
        st.info(f"This schedule cannot run: {err}")
        return
    rows, cols = window_shape(target.shape, names, schedule.total_steps)
    params = (tuple(names), schedule, values["anneal_polish"], rows, cols)
    cached = run.cache.get(CACHE_KEY)
    fresh = cached is not None and cached[0] == params
    if st.button("Compute" if not fresh else "Compute again", key="anneal_compute"):
        with run.lock:  # the learned functions as they are now, copied out of the live run
            learned = {
                n: copy.deepcopy(comparison[n].balancing)
                for n in names
                if n in comparison.names and (REGISTRY[n].learnable or REGISTRY[n].needs_balancing)
            }
            step = run.n_steps
        problem = chain_zero_window(target, rows, cols)
        with st.spinner(f"Annealing {len(names)} sampler(s), {schedule.total_steps:,} sweeps…"):
            view = annealing_view(
                problem, names, schedule, run.config.seed, learned, values["anneal_polish"]
            )
        run.cache[CACHE_KEY] = (params, step, view, (rows, cols), sorted(learned))
        cached, fresh = run.cache[CACHE_KEY], True
    if not fresh:
        where = (
            "the whole lattice"
            if (rows, cols) == target.shape
            else f"its centre {grid_size(rows, cols)} window (to bound the work)"
        )
        st.caption(
            f"Press Compute: {len(names)} sampler(s) × {CHAINS} chains on {where}, "
            f"{schedule.describe('sweeps')}."
        )
        return
    _, step, view, (rows, cols), learned = cached
    if view.message:
        st.info(view.message)
        return
    height, width = target.shape
    where = (
        f"the whole {grid_size(height, width)} lattice"
        if (rows, cols) == (height, width)
        else f"the centre {grid_size(rows, cols)} window of the {grid_size(height, width)} "
        "lattice (free boundary; the work is bounded)"
    )
    per_chain = " (chain 1's α)" if target.batch > 1 else ""
    verb = "anneals" if len(learned) == 1 else "anneal"
    frozen = (
        f" {' and '.join(label(n) for n in learned)} {verb} with the function learned by step "
        f"{step:,}, frozen: learning assumes one fixed target, and annealing changes it at every "
        "stage."
        if learned
        else ""
    )
    st.caption(
        f"The posterior{per_chain} on {where}, λ = {target.lam:g}; {CHAINS} chains per sampler "
        f"from uniform random starts, {schedule.describe('sweeps')}"
        + (", then the greedy polish." if values["anneal_polish"] else ".")
        + frozen
    )
    st.caption(ENERGY_MEANING)
    charts.show(view.figure, run, "annealing-energy")
    st.caption(TABLE_MEANING)
    st.dataframe(
        table(view),
        hide_index=True,
        column_config={
            "relative gap": st.column_config.NumberColumn(format="%.2e"),
            "sites agreeing": st.column_config.NumberColumn(format="percent"),
            "seconds to 0.1%": st.column_config.NumberColumn(format="%.3f"),
            "seconds": st.column_config.NumberColumn(format="%.2f"),
        },
    )
    st.caption(IMAGES_MEANING)
    images = map_images(view)
    for start in range(0, len(images), 4):
        columns = st.columns(4)
        for col, (image, caption) in zip(columns, images[start : start + 4], strict=False):
            col.image(pixels.data_uri(image), caption=caption, width=image.shape[1])
