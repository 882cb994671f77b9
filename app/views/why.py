"""The "why" panel: what each balancing function's shape does to the proposal and to the
acceptance ``A = min(1, Z(x) / Z(x'))``, tied to the run's live numbers.

The argument (spec 2-3): site ``i`` is proposed with weight ``g(t_i)`` out of
``Z(x) = sum_j g(t_j)``. Flipping ``i`` turns ``t_i`` into ``1 / t_i`` and touches only its
neighbours' ratios, so ``Z(x')`` differs from ``Z(x)`` by a few terms: the move is accepted
almost surely when those terms are small against ``Z``, and rarely when the way back weighs
more than everything else together.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import presentation
from app.state import proposes_one_site
from lsbcore import REGISTRY
from lsbcore.studies.figures import sampler_label as label

VIEWS = ("Proposal", "Balancing functions")
LIVE_S = 1.0  # the numbers follow a running run at most this often

GENERAL = (
    "Site *i* is proposed with weight g(tᵢ), tᵢ = p(x with i flipped)/p(x), out of "
    "Z(x) = Σⱼ g(tⱼ), and the move is accepted with A = min(1, Z(x)/Z(x′)). A flip turns tᵢ "
    "into 1/tᵢ and changes only its neighbours' ratios, so A is close to 1 when those few "
    "weights are small next to Z, and small when the way back outweighs everything else."
)

SHAPES = {
    "barker": "**t/(1+t)** is below 1 and close to t when t ≪ 1: an unlikely flip is proposed "
    "about as rarely as the target would make it, and no single weight exceeds 1, so "
    "Z(x′) ≈ Z(x) and almost every proposal is accepted.",
    "sqrt": "**√t** grows without bound, but slowly: a favourable flip stands out, the way back "
    "weighs 1/√t, and Z changes by a few such terms: acceptance stays high unless one site "
    "dwarfs all the others.",
    "min": "**min(1,t)** weighs every favourable flip 1 and an unfavourable one t: weights stay "
    "in [0, 1], so Z(x′) ≈ Z(x) and A ≈ 1, but it does not prefer the best of the favourable "
    "flips.",
    "max": "**max(1,t)** never drops below 1: every unfavourable flip weighs as much as a "
    "neutral one. Once the chain has settled most flips are unfavourable, so the proposal is "
    "close to uniform: it has stopped being informed. And after an unfavourable flip the way "
    "back weighs 1/t ≫ 1, so Z(x′) ≫ Z(x) and A = Z(x)/Z(x′) is small: most proposals are "
    "rejected.",
    "lsb1": "**LSB 1** mixes the four with learned softmax weights (the Softmax weights tab): "
    "its shape, and so its acceptance, follows the function it leans on.",
    "lsb2": "**LSB 2** learns its own curve g(t) = (h(t) + t·h(1/t))/2 (the Balancing "
    "functions tab): learning trades proposal sharpness against the acceptance it costs.",
    "learned": "**The imported function** is a learned curve, frozen: compare its shape with "
    "the four fixed ones in the Balancing functions tab.",
}


def live_numbers(run) -> list[dict]:
    """Per balanced single-site sampler: its acceptance so far, the probability that its next
    step moves (``sum_i T_i``, the mean over chains) and how widely its proposal spreads (the
    effective number of sites ``exp(H(Q))`` over all sites, mean over chains)."""
    rows = []
    with run.lock:
        for name, sampler in run.comparison.samplers.items():
            if not (REGISTRY[name].balanced and proposes_one_site(name)):
                continue
            chains = sampler.n_chains  # both come in the target's layout: flatten the sites
            log_q = sampler.proposal_log_probs().reshape(chains, -1).cpu().numpy()
            q = np.exp(log_q)
            entropy = -(q * np.where(q > 0, log_q, 0.0)).sum(1)
            move = sampler.flip_probabilities().reshape(chains, -1).sum(1).cpu().numpy()
            rows.append(
                {
                    "name": name,
                    "acceptance": float(sampler.accept_rate),
                    "move": float(move.mean()),
                    "spread": float(np.exp(entropy).mean() / sampler.n_sites),
                }
            )
    return rows


def _range(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if abs(high - low) < 0.005 else f"{low:.2f}–{high:.2f}"


def comparison_sentence(row: dict, rows: list[dict]) -> str:
    """This sampler's numbers against the others', in one sentence."""
    others = [r for r in rows if r["name"] != row["name"]]
    own = (
        f"acceptance so far {row['acceptance']:.2f}, P(move) now {row['move']:.2f}, proposal "
        f"spread over {row['spread']:.0%} of the sites"
    )
    if not others:
        return f"Now: {own}."
    accepted = [r["acceptance"] for r in others if np.isfinite(r["acceptance"])]
    parts = [f"P(move) {_range([r['move'] for r in others])}"]
    if accepted:
        parts.insert(0, f"acceptance {_range(accepted)}")
    parts.append(f"spread {_range([r['spread'] for r in others])}")
    return f"Now: {own} (the others: {', '.join(parts)})."


def render(run) -> None:
    """The panel: open in presentation mode, an expander otherwise."""
    names = [n for n in run.comparison.names if REGISTRY[n].balanced and proposes_one_site(n)]
    if not names:
        return
    box = (
        st.container(border=True)
        if presentation.is_on()
        else st.expander("Why do the balancing functions behave so differently?")
    )
    with box:
        if presentation.is_on():
            st.subheader("Why the balancing functions behave so differently")
        st.markdown(GENERAL)
        rows = run.throttled("why", lambda: live_numbers(run), (), LIVE_S)
        by_name = {r["name"]: r for r in rows}
        for name in names:
            if name not in by_name:
                continue
            st.markdown(SHAPES.get(name, f"**{label(name)}**"))
            st.caption(comparison_sentence(by_name[name], rows))
        st.caption(
            "Acceptance so far: accepted over proposed flips since the start. P(move) now: the "
            "probability that the next step changes the state, Σᵢ Q(i)·A(i), averaged over "
            "the chains. Spread: exp(entropy of Q) as a share of the sites; 100% is a uniform "
            "proposal."
        )
