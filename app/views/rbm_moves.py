"""The RBM's move statistics: acceptance and hop distance per sampler.

The acceptance rate is the share of proposals accepted; the hop distance, the mean number of
units a chain changes per step (a block sampler may change several at once, a rejected step
none). Evaluations per chain count the target's cost (``docs/method.md`` section 9).
"""

from __future__ import annotations

import math

import streamlit as st

from app import tables


def move_table(run) -> list[dict]:
    from lsbcore.rbm.variants import display_name

    comparison = run.comparison
    rows = []
    with run.lock:
        for label, sampler in comparison.samplers.items():
            rate = sampler.accept_rate
            rows.append(
                {
                    "sampler": display_name(label),
                    "acceptance": rate if rate is not None and math.isfinite(rate) else None,
                    "hop distance per step": comparison.hop_distance(label),
                    "evaluations per chain": int(sampler.n_target_evals),
                    "sampling seconds": float(sampler.wall_seconds),
                }
            )
    return rows


def render(run) -> None:
    table = move_table(run)
    tables.dataframe(
        table,
        hide_index=True,
        column_config={
            "acceptance": st.column_config.ProgressColumn(
                "acceptance", min_value=0.0, max_value=1.0, format="%.3f"
            ),
            "hop distance per step": st.column_config.NumberColumn(format="%.3f"),
            "evaluations per chain": st.column_config.NumberColumn(format="%d"),
            "sampling seconds": st.column_config.NumberColumn(format="%.2f"),
        },
    )
    st.caption(
        "Acceptance: the share of proposals accepted. Hop distance: units changed per step, "
        "averaged over chains and steps (a block sampler can change several at once)."
    )
