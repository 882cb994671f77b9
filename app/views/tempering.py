"""The Tempering tab: where every local sampler fails, and the remedy.

On a bimodal posterior (strong coupling, no data: all +1 and all -1 equally likely) a single
chain of any local sampler stays in the mode it starts in; parallel tempering runs the same
sampler on hotter copies ``p^beta`` and exchanges states between neighbouring temperatures, so
the cold chain (which samples ``p`` exactly) crosses between the modes. Computed on request.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import page_state, tables, view_params
from app.text import grid_size
from lsbcore import REGISTRY
from lsbcore.number_text import number_text
from lsbcore.studies import figures
from lsbcore.studies.figures import sampler_label as label
from lsbcore.targets.ising import CRITICAL_LAMBDA
from lsbcore.tempering import BIMODAL_LAMBDA, BIMODAL_SIZE, bimodal_ising
from lsbcore.tempering.comparison import TemperingComparison, compare_with_single_chain

CACHE_KEY = "tempering"
POSTERIORS = {"preset": "Bimodal preset", "run": "This run's posterior"}
# sweeps x (replicas + 1) x sites: beyond this a computation takes well over ten seconds
MAX_WORK = 25_000_000
NOTE_WORK = 5_000_000  # above this, say it takes a while
BURN_IN_SHARE = 5  # a fifth of the sweeps again as burn-in: the ladder adapts
LEARN_SWEEPS = 10  # LSB 1 / LSB 2 learn in the first sweeps of it (learning steps cost more)

PARAMS = view_params.TEMPERING  # the tab's link parameters (app/view_params.py)
KEYS = tuple(param.key for param in PARAMS)
BY_KEY = {param.key: param for param in PARAMS}

INTRO = (
    "Parallel tempering runs the chosen sampler on R copies of the posterior at inverse "
    "temperatures 1 = β₀ > β₁ > … > β_min (the copy at β samples p^β: flatter when β is small) "
    "and, after every sweep, proposes to exchange the states of neighbouring copies, accepted "
    "with min(1, exp((β_r − β_{r+1})(log p̃(x_{r+1}) − log p̃(x_r)))). Both moves keep every "
    "p^β_r invariant, so the cold copy (β = 1) samples the posterior itself, exactly."
)


@dataclass(frozen=True)
class TemperingView:
    """What the tab draws, or only a message."""

    result: TemperingComparison | None
    description: str = ""
    message: str = ""


def view_target(choice: str, run_target):
    """The posterior to temper: the preset, or chain 0's field of the run's posterior."""
    if choice == "preset":
        return bimodal_ising()
    return run_target.chain(0) if run_target.batch > 1 else run_target


def work(sweeps: int, replicas: int, n_sites: int) -> int:
    """Site updates of the whole computation (tempering plus the single chain, burn-in in)."""
    return int(sweeps * (1 + 1 / BURN_IN_SHARE) * (replicas + 1) * n_sites)


def millions(cost: int) -> str:
    """``cost`` (above ``MAX_WORK``) in millions with the fewest decimals that still show it
    above the limit: 25,300,000 is "25.3", not "25", which would read as the limit itself."""
    for digits in range(7):
        text = f"{cost / 1e6:.{digits}f}"
        if float(text) > MAX_WORK / 1e6:
            return text
    return f"{cost / 1e6:.6f}"


def _most(fits, low: int, high: int) -> int | None:
    """The largest value in ``[low, high]`` for which ``fits`` holds, None when none does."""
    best = None
    for value in range(low, high + 1):
        if fits(value):
            best = value
    return best


def refusal(choice: str, sweeps: int, replicas: int, n_sites: int) -> str | None:
    """Why the tab will not compute these settings, with the cheaper choices that would fit
    (never the one already made); None when they fit."""
    cost = work(sweeps, replicas, n_sites)
    if cost <= MAX_WORK:
        return None
    sweep_range = BY_KEY["pt_sweeps"]
    replica_range = BY_KEY["pt_replicas"]
    most_sweeps = _most(
        lambda s: work(s, replicas, n_sites) <= MAX_WORK, sweep_range.low, sweeps - 1
    )
    most_replicas = _most(
        lambda r: work(sweeps, r, n_sites) <= MAX_WORK, replica_range.low, replicas - 1
    )
    choices = []
    if most_sweeps is not None:
        choices.append(f"at most {most_sweeps:,} sweeps")
    if most_replicas is not None:
        choices.append(f"at most {most_replicas} replicas")
    if choice != "preset" and work(sweeps, replicas, BIMODAL_SIZE**2) <= MAX_WORK:
        choices.append(f"the bimodal preset ({BIMODAL_SIZE} × {BIMODAL_SIZE})")
    text = (
        f"{sweeps:,} sweeps of {replicas} replicas on {n_sites:,} sites is {millions(cost)} "
        f"million site updates, more than the {MAX_WORK / 1e6:.0f} million this tab computes "
        "on request."
    )
    if choices:
        text += " Choose " + ", or ".join(choices) + "."
    return text


def tempering_view(choice, run_target, sampler, replicas, beta_min, adapt, sweeps, seed=0):
    """Run the comparison for the tab's controls, or say why not."""
    target = view_target(choice, run_target)
    refused = refusal(choice, sweeps, replicas, target.n_sites)
    if refused:
        return TemperingView(None, message=refused)
    try:
        result = compare_with_single_chain(
            target, sampler, sweeps=sweeps, burn_in=sweeps // BURN_IN_SHARE,
            n_replicas=replicas, beta_min=beta_min, adapt=adapt, seed=seed,
            learn_sweeps=LEARN_SWEEPS,
        )  # fmt: skip
    except ValueError as err:  # the library's refusal, in its own sentence
        return TemperingView(None, message=f"Tempering could not run: {err}")
    if choice == "preset":
        described = (
            f"Bimodal preset: {BIMODAL_SIZE} × {BIMODAL_SIZE} Ising, free boundary, α = 0, "
            f"λ = {BIMODAL_LAMBDA:g} (critical λ ≈ {CRITICAL_LAMBDA:.2f}): the modes all +1 and "
            "all −1 are equally likely by symmetry."
        )
    else:
        dims = tuple(target.shape)
        shape = grid_size(*dims) if len(dims) == 2 else " × ".join(str(v) for v in dims)
        described = f"This run's posterior, chain 1's field ({shape} sites)."
    return TemperingView(result, described)


def swap_table(result: TemperingComparison) -> list[dict]:
    return [
        {
            "pair": f"{r} ↔ {r + 1}",
            "β_r": number_text(float(result.betas[r])),
            "β_r+1": number_text(float(result.betas[r + 1])),
            "swaps accepted": number_text(float(result.swap_rates[r])),
        }
        for r in range(len(result.betas) - 1)
    ]


def mode_table(result: TemperingComparison) -> list[dict]:
    rows = []
    for name, modes, seconds in (
        ("parallel tempering, cold chain", result.tempered_modes, result.tempering_seconds),
        ("single chain", result.single_modes, result.single_seconds),
    ):
        rows.append(
            {
                "chain": name,
                "time in mode +1": number_text(float(modes.fraction_plus[0])),
                "time in mode −1": number_text(float(modes.fraction_minus[0])),
                "mode switches": number_text(int(modes.switches[0])),
                "wall time (s)": number_text(seconds),
            }
        )
    return rows


def _controls() -> dict:
    names = [n for n in BY_KEY["pt_sampler"].choices]
    page_state.restore_links(KEYS)
    with st.container(horizontal=True):
        st.selectbox("Sampler inside each replica", names, format_func=label, key="pt_sampler")
        st.radio(
            "Posterior", list(POSTERIORS), format_func=POSTERIORS.get, key="pt_posterior",
            horizontal=True,
        )  # fmt: skip
    with st.container(horizontal=True):
        params = BY_KEY
        st.number_input(
            "Replicas R", min_value=params["pt_replicas"].low,
            max_value=params["pt_replicas"].high, step=1, key="pt_replicas",
        )  # fmt: skip
        st.number_input(
            "β_min (hottest replica)", min_value=params["pt_beta_min"].low,
            max_value=params["pt_beta_min"].high, step=0.05, format="%.2f", key="pt_beta_min",
        )  # fmt: skip
        st.number_input(
            "Sweeps per replica", min_value=params["pt_sweeps"].low,
            max_value=params["pt_sweeps"].high, step=100, key="pt_sweeps",
        )  # fmt: skip
        st.toggle(
            "Adapt the ladder during burn-in", key="pt_adapt",
            help="Toward equal swap rates between neighbours; fixed after burn-in.",
        )  # fmt: skip
    values = page_state.remember_links(KEYS)
    return values


def render_run(run) -> None:
    """The Tempering tab of the dashboard."""
    from app import charts

    st.caption(INTRO)
    values = _controls()
    target = run.problem.target
    choice = values["pt_posterior"]
    n_sites = BIMODAL_SIZE**2 if choice == "preset" else target.n_sites
    cost = work(values["pt_sweeps"], values["pt_replicas"], n_sites)
    key = tuple(values[k] for k in KEYS) + (id(target) if choice == "run" else None,)
    cached = run.cache.get(CACHE_KEY)
    fresh = cached is not None and cached[0] == key
    if st.button("Compute" if not fresh else "Compute again", key="pt_compute"):
        with st.spinner("Running parallel tempering and a single chain…"):
            view = tempering_view(
                choice, target, values["pt_sampler"], values["pt_replicas"],
                values["pt_beta_min"], values["pt_adapt"], values["pt_sweeps"],
                seed=run.config.seed,
            )  # fmt: skip
        run.cache[CACHE_KEY] = (key, view)
        cached, fresh = run.cache[CACHE_KEY], True
    if not fresh:
        note = f"Press Compute: {cost / 1e6:.1f} million site updates" + (
            ", this will take a while (tens of seconds)." if cost > NOTE_WORK else "."
        )
        note += (
            " Per site update, block Gibbs is the cheapest; a single-site sampler costs about "
            "2-3 times as much, LSB 1 about 4 and LSB 2 about 8 (measured at 1,000 sweeps of "
            "the preset: 1.2 s for block Gibbs, 10 s for LSB 2; several times longer while the "
            "machine is busy)."
        )
        if cost > MAX_WORK:  # the sentence with the choices that fit comes on Compute
            note = f"{millions(cost)} million site updates: too many, choose fewer sweeps."
        st.caption(note)
        return
    view = cached[1]
    if view.message:
        st.info(view.message)
        return
    draw(view, run, charts)


def draw(view: TemperingView, run, charts) -> None:
    result = view.result
    sampler = label(result.sampler)
    learning = (
        f" ({label(result.sampler)} learning at its own temperature in the first "
        f"{min(LEARN_SWEEPS, result.burn_in)})"
        if REGISTRY[result.sampler].learnable
        else ""
    )
    st.caption(
        f"{view.description} {sampler} in every replica, one chain each; {result.burn_in:,} "
        f"burn-in sweeps{learning}, the ladder adapting if asked, then {result.sweeps:,} "
        "sweeps recorded with the ladder and any learned function fixed."
    )
    charts.show(
        figures.tempering_ladder_figure(result.betas, result.swap_rates, result.ladder_history),
        run,
        "tempering-ladder",
    )
    st.caption(
        "Left: the inverse temperature of each replica (0 is the posterior itself; grey: the "
        "ladder as it adapted during burn-in). Right: the fraction of proposed exchanges each "
        "neighbouring pair accepted while sampling. A pair that rarely swaps is a bottleneck: "
        "states cannot travel between the hot and the cold end through it. Adaptation moves "
        "the temperatures toward equal rates."
    )
    tables.dataframe(swap_table(result), hide_index=True)
    charts.show(
        figures.replica_magnetisation_figure(result.magnetisation[:, :, 0], result.betas),
        run,
        "tempering-replicas",
    )
    st.caption(
        "The magnetisation m/n (the mean spin) of every replica after each sweep, one row per "
        "replica, the posterior itself (β = 1) on top and the hottest at the bottom. Near +1 "
        "the state is mostly +1, near −1 mostly −1. The hot replicas (small β) wander freely "
        "between the two; the cold one jumps when exchanges bring it a state from the other "
        "mode, handed down the ladder one neighbour at a time."
    )
    charts.show(
        figures.cold_versus_single_figure(
            result.cold[:, 0], result.single[:, 0], result.sampler, result.threshold
        ),
        run,
        "tempering-cold-vs-single",
    )
    st.caption(
        f"The cold chain of tempering against a single chain of {sampler} on the same "
        f"posterior, over the same sweeps, from the same start. Dashed: ±{result.threshold:g}. "
        "A chain is in mode +1 once m/n passes the upper line and stays there until it passes "
        "the lower one (hysteresis: wandering around 0 is not a switch). Both chains target "
        "the same posterior, but only one of them visits both modes."
    )
    tables.dataframe(mode_table(result), hide_index=True)
    st.caption(
        "The fraction of recorded sweeps spent in each mode (before the first crossing a chain "
        "has none) and the number of switches between them. With both modes equally likely, "
        "an exact sampler that mixes spends about half its time in each; the wall time "
        "includes burn-in, and tempering does R times the work of the single chain."
    )
