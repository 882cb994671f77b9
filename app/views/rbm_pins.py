"""The RBM page's pinned runs: their MMD curves over the current run's, and their summaries.

A pin of an RBM run keeps each sampler's MMD checkpoints (``app/pins.py``); here the pins of the
same model are overlaid on the current run (dashed, one dash per pin, each sampler its colour),
with a table of acceptance, sampling seconds and the last log10 MMD per sampler and run. Pins
of other targets are listed by name only: their figures live on their own page.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import charts, pin_controls
from app.pins import Pin
from app.views import rbm_mmd
from lsbcore.studies import figures

DASHES = ("dash", "dot", "dashdot", "longdash", "longdashdot")


def overlay_figure(current: dict[str, dict], pinned: dict[str, Pin], floor) -> go.Figure:
    """The current run's curves (solid) and each pin's (one dash per pin)."""
    from lsbcore.rbm.variants import display_name

    fig = rbm_mmd.mmd_figure(current, floor)
    for k, (name, pin) in enumerate(pinned.items()):
        for label, curve in pin.mmd.items():
            xs = np.asarray(curve["evals"], dtype=np.float64)
            ys = np.asarray([np.nan if v is None else v for v in curve["log_mmd"]], np.float64)
            keep = (xs > 0) & np.isfinite(ys)
            fig.add_trace(
                go.Scatter(
                    x=xs[keep],
                    y=ys[keep],
                    mode="lines",
                    name=f"{display_name(label)} ({name})",
                    line={
                        "color": figures.sampler_colour(label),
                        "dash": DASHES[k % len(DASHES)],
                        "width": 1.8,
                    },
                )
            )
    return fig


def summary_rows(pinned: dict[str, Pin]) -> list[dict]:
    """One row per pinned run and sampler: acceptance, seconds and the last log10 MMD."""
    from lsbcore.rbm.variants import display_name

    rows = []
    for name, pin in pinned.items():
        for label, summary in pin.samplers.items():
            last = [v for v in pin.mmd.get(label, {}).get("log_mmd", []) if v is not None]
            rows.append(
                {
                    "run": name,
                    "sampler": display_name(label),
                    "acceptance": summary.get("accept_rate"),
                    "sampling seconds": summary.get("wall_seconds"),
                    "last log10 MMD": last[-1] if last else None,
                }
            )
    return rows


def render(run) -> None:
    same, others = pin_controls.pins_of(lambda pin: pin.config.target == run.config.target)
    pin_controls.expired_notice()
    if not same:
        st.info(
            'No pinned runs of this model yet. Name this run under "Pin this run" next to the '
            "Run button; its MMD curves are then drawn here under every later run's."
        )
    floor = rbm_mmd.floor_of(run)
    fig = run.throttled(
        "rbm_pins",
        lambda: overlay_figure(rbm_mmd.curves_now(run), same, floor),
        tuple((label, pin.created) for label, pin in same.items()),  # a rename redraws
    )
    charts.show(fig, run, "rbm-pinned-mmd")
    if same:
        st.caption("Solid: this run. Dashed: the pinned runs, one dash each.")
        st.dataframe(summary_rows(same), hide_index=True)
    pin_controls.others_caption(others)
    pin_controls.managed()  # last: the figure stays whole on a lecture screen
