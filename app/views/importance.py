"""Importance sampling: independent draws from a factorised proposal (one coin per site, from
the data term alone or from a mean-field fit), weighted by ``p~(x) / q(x)``. On a window of the
run's posterior: the estimate of log Z and of the marginals with their error bars and the Kish
ESS; over windows of growing side: how the ESS collapses (Goodfellow et al., ch. 17).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from app import view_params
from app.text import grid_size
from lsbcore.exact import MAX_SITES
from lsbcore.importance import (
    PROPOSALS,
    SIDES,
    CollapseRow,
    ImportanceEstimate,
    collapse_study,
    enumerated_p_plus,
    exact_log_partition,
    importance_sample,
)
from lsbcore.number_text import number_text
from lsbcore.studies import figures

PARAMS = view_params.IMPORTANCE  # the tab's link parameters (app/view_params.py)
KEYS = tuple(param.key for param in PARAMS)
CACHE_KEY = "importance"

INTRO = (
    "Importance sampling needs no Markov chain: it draws N independent states from a simple "
    "proposal q, here a product of one coin per site, and weights each by w = p̃(x) / q(x). "
    "The mean weight estimates the normalising constant Z, the weighted mean of x the "
    "marginals. The **field** proposal is the posterior without its couplings, "
    "q(xᵢ = +1) = sigmoid(2 αᵢ); **mean field** also includes the neighbours' average pull, "
    "solving mᵢ = tanh(αᵢ + λ Σⱼ mⱼ)."
)
ESTIMATE_MEANING = (
    "log Ẑ = logsumexp(log w) − log N, with the delta-method error bar sd(w) / (√N · mean w). "
    "The Kish effective sample size (Σw)² / Σw² counts how many equally weighted draws the "
    "weighted sample is worth. The bars are only as good as the weights: when a handful of "
    "draws carry the weight, the bar itself is unreliable (at ESS = 1 it is exactly 1, "
    "whatever the real error) and log Ẑ tends to lie below the truth. Below an ESS of 5 the "
    "tab shows no bar. Measured on the paper's windows (3 × 3 to 12 × 12, both proposals, "
    "N = 4,000), log Ẑ lay within 2 se of the exact log Z in 74% of the runs with a bar, not "
    "the 95% a normal error would, and below it in 73%: the draws a sample misses are the "
    "heavy ones."
)
MARGINALS_MEANING = (
    "Left: the self-normalised estimate of P(xᵢ = +1); middle: its one-standard-error bar "
    "(delta method); right, on windows of at most 12 sites: the exact marginals by "
    "enumeration. Where the proposal rarely draws what the posterior favours, the bar is wide, "
    "or falsely narrow when no draw landed there at all."
)
COLLAPSE_MEANING = (
    "Why the ESS collapses: the log weight log p̃(x) − log q(x) is a sum of small misfits, one "
    "per site (the proposal ignores how each site's neighbours actually pull on it), so its "
    "variance grows about in proportion to the number of sites n (the table's sd of log w grows "
    "like √n). The weights become log-normal, and N / ESS ≈ exp(var log w) grows exponentially "
    "in n: past a few dozen sites a handful of draws carry all the weight, the ESS falls to the "
    "floor 1/N, and doubling N barely helps. This is the chapter's warning (Goodfellow et al., "
    "ch. 17): importance sampling from a simple proposal fails in high dimension, which is why "
    "MCMC, moving locally through the likely states, is used instead. Mean field delays the "
    "collapse but does not prevent it."
)


@dataclass(frozen=True)
class ImportanceView:
    """What the tab draws: the estimate on one window (with the exact values where they can be
    had) and the collapse study's rows."""

    where: str
    estimate: ImportanceEstimate
    exact_log_z: float | None
    exact_p_plus: torch.Tensor | None
    rows: list[CollapseRow]
    seconds: float


def centre_window(target, side: int):
    """Chain 0's posterior on the centre ``side x side`` window (free boundary: a window has
    no wrap-around), or the whole of it when the window would cover the lattice; with a
    sentence saying which."""
    from app.views.exact_chain import window_target

    single = target.chain(0) if target.batch > 1 else target
    height, width = single.shape if len(single.shape) == 2 else (1, single.n_sites)
    if (side >= height and side >= width) or not hasattr(single, "alpha"):
        boundary = getattr(single, "boundary", "")
        whole = f"the whole {grid_size(height, width)} posterior of chain 1 ({boundary} boundary)"
        return single, whole
    rows, cols = min(side, height), min(side, width)
    return window_target(single, rows, cols), (
        f"the centre {grid_size(rows, cols)} window of chain 1's α (free boundary)"
    )


def study_targets(target, max_side: int) -> list:
    """Centre windows of chain 0's posterior for every side of ``SIDES`` that fits."""
    single = target.chain(0) if target.batch > 1 else target
    if not hasattr(single, "alpha"):
        return [single]
    limit = min(max_side, *single.shape)
    return [centre_window(single, side)[0] for side in SIDES if side <= limit]


def compute(target, proposal: str, n_samples: int, side: int, max_side: int, seed: int = 0):
    """The estimate on the centre window of ``side`` and the collapse study up to
    ``max_side``, both proposals there, ``n_samples`` draws each."""
    start = time.perf_counter()
    window, where = centre_window(target, side)
    estimate = importance_sample(window, proposal, n_samples, seed)
    exact_log_z = exact_log_partition(window)
    exact_p_plus = enumerated_p_plus(window) if window.n_sites <= MAX_SITES else None
    rows = collapse_study(study_targets(target, max_side), PROPOSALS, n_samples, seed)
    return ImportanceView(
        where, estimate, exact_log_z, exact_p_plus, rows, time.perf_counter() - start
    )


def site_values(target, proposal: str, n_samples: int, side: int, max_side: int) -> int:
    """How many site values ``compute`` draws and weighs: its cost, for the page to announce."""
    window, _ = centre_window(target, side)
    study = sum(t.n_sites for t in study_targets(target, max_side))
    return n_samples * (window.n_sites + len(PROPOSALS) * study)


def collapse_curves(rows: list[CollapseRow]) -> dict:
    """``{proposal: (sites, ESS / N)}`` for ``figures.importance_collapse_figure``."""
    return {
        name: ([r.sites for r in rows if r.proposal == name],
               [r.ess_fraction for r in rows if r.proposal == name])
        for name in dict.fromkeys(r.proposal for r in rows)
    }  # fmt: skip


def collapse_table(rows: list[CollapseRow]) -> list[dict]:
    """The study as display rows, numbers as text (a collapsed ESS / N reads 1e-4, not
    0.0001000000; an error that cannot be computed reads as a dash)."""
    return [
        {
            "window": grid_size(*r.shape) if len(r.shape) == 2 else f"{r.sites} sites",
            "sites": r.sites,
            "proposal": r.proposal,
            "ESS / N": number_text(r.ess_fraction),
            "ESS": number_text(r.ess),
            "se of log Ẑ": number_text(r.log_z_se),
            "sd of log w": number_text(r.log_w_sd),
            "log Ẑ − log Z": number_text(r.error),
        }
        for r in rows
    ]


# a Kish ESS this close to N: the draws weigh about the same, and nothing collapses to show
NEAR_EXACT_ESS = 0.99


def near_exact_note(estimate: ImportanceEstimate, window, lam: float) -> str | None:
    """One sentence when the proposal is already about the posterior on ``window`` (a photo
    whose centre the data term decides, such as a saturated background): else the tab shows a
    perfect estimate and no collapse without saying why."""
    if estimate.ess_fraction < NEAR_EXACT_ESS:
        return None
    field = window.alpha.abs()
    return (
        f"Every draw weighs about the same here (Kish ESS {estimate.ess_fraction:.1%} of N): "
        f"on this window the data term decides each site (|α| from {field.min():.3g} to "
        f"{field.max():.3g}, against λ = {lam:g}), so one coin per site is already close to "
        "the posterior. The collapse shows where the data are weaker: a paper case, a lower μ, "
        "or a photo whose centre is less certain."
    )


# a Kish ESS below this many draws: the weights' spread, and so the error bar, rests on a few
# draws. The bar is about sqrt(1 / ESS - 1 / N): at ESS = 1 exactly 1, whatever the real error
FEW_DRAWS_ESS = 5.0


def log_z_metric(estimate: ImportanceEstimate) -> tuple[str, str, str | None]:
    """The log Ẑ metric's label, value and note: with its error bar, or without one when the
    ESS is too small for the bar to mean anything (the metric said "± 1.000" at ESS 1)."""
    if estimate.ess >= FEW_DRAWS_ESS:
        return "log Ẑ ± se", f"{estimate.log_z:,.3f} ± {estimate.log_z_se:.3f}", None
    return (
        "log Ẑ",
        f"{estimate.log_z:,.3f}",
        f"no error bar: ESS {estimate.ess:.1f} < {FEW_DRAWS_ESS:g}",
    )


def render_run(run) -> None:
    """The Importance sampling tab: controls, then on request the estimate and the study."""
    import streamlit as st

    from app import charts, page_state

    st.markdown(INTRO)
    page_state.restore_links(KEYS)
    with st.container(horizontal=True):
        st.radio("Proposal", PROPOSALS, key="is_proposal", horizontal=True)
        st.number_input("Samples N", 100, 20_000, step=1000, key="is_samples")
        st.number_input("Window side", 2, 64, key="is_side", help="The estimate's window.")
        st.number_input(
            "Study up to side", 4, 64, key="is_max_side", help="Largest window of the study."
        )
    values = page_state.remember_links(KEYS)
    params = tuple(values[k] for k in KEYS)
    cached = run.cache.get(CACHE_KEY)
    fresh = cached is not None and cached[0] == params
    if st.button("Compute" if not fresh else "Compute again", key="is_compute"):
        with st.spinner("Drawing and weighting…"):
            view = compute(run.problem.target, *params, seed=run.config.seed)
        run.cache[CACHE_KEY] = (params, view)
        cached, fresh = run.cache[CACHE_KEY], True
    if not fresh:
        work = site_values(run.problem.target, *params)
        st.caption(
            f"Press Compute: N draws on the window, then N per proposal on each window of the "
            f"study, {work / 1e6:,.0f} million site values in all (about a second per 10 "
            "million on a 2-core server: a second or two at the defaults)."
        )
        return
    _, view = cached
    est = view.estimate
    st.caption(
        f"On {view.where}, λ = {run.problem.lam:g}, {est.n_samples:,} draws from the "
        f"{est.proposal} proposal; computed in {view.seconds:.1f} s."
    )
    if est.fit is not None and not est.fit.converged:
        st.caption(
            f"The mean-field iterations stopped after {est.fit.iterations:,} steps, "
            f"{est.fit.residual:.1e} from a fixed point; the weights stay unbiased for any "
            "proposal, it is only a worse one."
        )
    with st.container(horizontal=True):
        label, value, note = log_z_metric(est)
        st.metric(label, value, delta=note, delta_color="off", delta_arrow="off")
        if view.exact_log_z is not None:
            st.metric(
                "exact log Z",
                f"{view.exact_log_z:,.3f}",
                delta=f"error {est.log_z - view.exact_log_z:+.3f}",
                delta_color="off",
                delta_arrow="off",
            )
        st.metric("Kish ESS", f"{est.ess:,.1f}", delta=f"{est.ess_fraction:.2%} of N",
                  delta_color="off", delta_arrow="off")  # fmt: skip
        st.metric("sd of log w", f"{est.log_w_sd:.2f}")
    st.caption(ESTIMATE_MEANING)
    note = near_exact_note(est, centre_window(run.problem.target, params[2])[0], run.problem.lam)
    if note:
        st.info(note)
    exact = None if view.exact_p_plus is None else view.exact_p_plus.numpy()
    charts.show(
        figures.importance_marginals_figure(est.p_plus.numpy(), est.p_plus_se.numpy(), exact),
        run,
        "importance-marginals",
    )
    st.caption(MARGINALS_MEANING)
    st.markdown("**The collapse study**: the same, on centre windows of growing side.")
    charts.show(
        figures.importance_collapse_figure(collapse_curves(view.rows), est.n_samples),
        run,
        "importance-collapse",
    )
    st.caption(COLLAPSE_MEANING)
    st.dataframe(collapse_table(view.rows), hide_index=True)
    st.caption(
        "log Ẑ − log Z is exact where it can be computed: by enumeration up to 12 sites, by "
        "the transfer matrix up to a side of 16 (blank beyond). Compare it with the se column: "
        "once the ESS is a few draws the error is many times the bar."
    )
