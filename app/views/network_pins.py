"""The network page's pinned runs: the paper ESS of this run beside that of earlier runs of the
same network (the paper's Table 3 measure, mean over chains), the settings that differ and the
summary numbers per sampler.

A pin of a network run is the Ising page's kind (``app/pins.py``: summaries, autocorrelation,
g(t), the learned functions, LSB 1's weights); this view keeps to the pins of the same target
and problem (MN 1 with any ε, one uploaded file by its name, variable selection), where the
magnetisation's ESS means the same thing. Pins of other targets are listed by name only: their
figures live on their own page.
"""

from __future__ import annotations

import streamlit as st

from app import charts, pin_controls, pins, tables
from app.pins import Pin
from app.views import compare
from lsbcore.studies import figures


def same_network(pin: Pin, run) -> bool:
    """Whether ``pin`` sampled the network ``run`` samples (by target and problem name)."""
    return pin.config.target == run.config.target and pin.problem == run.problem.name


def ess_figure(runs: dict[str, Pin]):
    """The paper ESS (mean over chains) of every run, as grouped bars per sampler."""
    values = {
        label: {n: s.get("ess_paper_mean") for n, s in pin.samplers.items()}
        for label, pin in runs.items()
    }
    return figures.pinned_bars_figure(values, "Paper ESS by run (mean over chains)", "paper ESS")


def render(run) -> None:
    same, others = pin_controls.pins_of(lambda pin: same_network(pin, run))
    pin_controls.expired_notice()
    if not same:
        st.info(
            'No pinned runs of this network yet. Name this run under "Pin this run" next to the '
            "Run button; its ESS is then drawn here beside every later run's."
        )
    current = f"Current run (step {run.n_steps:,})"
    now = run.throttled("network-pin-now", lambda: pins.capture(run, "current run"), max_age_s=5.0)
    runs = {current: now, **same}
    shown = (id(now), *((label, pin.created) for label, pin in same.items()))
    fig = run.throttled("network-pins", lambda: ess_figure(runs), shown)
    charts.show(fig, run, "network-pinned-ess")
    if run.comparison.phase == "burnin":
        st.caption("This run's ESS starts after burn-in: its bars read n/a until then.")
    if same:
        diff = compare.differences(runs)
        st.markdown("**Settings that differ**")
        if diff:
            tables.dataframe(diff, hide_index=True)
        else:
            st.caption("Every setting is the same in these runs.")
        st.markdown("**Summary per sampler**")
        tables.dataframe(compare.summary_rows(runs), hide_index=True)
    pin_controls.others_caption(others, "targets or networks")
    pin_controls.managed()  # last: the figure stays whole on a lecture screen
