"""View: Compare pinned runs. Two or more pins (the current run may join them) side by side: the
settings that differ, the summary numbers per sampler, the Mixing figures (ESS, autocorrelation)
and the Balancing figures (g(t), LSB 1's weights).

Figures whose runs would be hard to match across columns (ESS, weights) are overlaid as grouped
bars, runs named in the legend; the curves (autocorrelation, g(t)) are drawn per run in columns,
so every sampler keeps its colour. ``differences`` and ``summary_rows`` are plain data, tested
without Streamlit.
"""

from __future__ import annotations

from dataclasses import fields

import streamlit as st

from app import charts, pin_controls, pins, presentation, tables
from app.config import LABELS, Config
from app.page_state import COMPARE_RUNS
from app.pins import Pin
from app.target_kind import kind_of
from app.text import escape
from lsbcore.number_text import MISSING, number_text
from lsbcore.studies import figures
from lsbcore.studies.figures import sampler_label

CURRENT = "current"  # the option that stands for the run on the page
MAX_COMPARED = 4  # columns wider than a quarter of the page stay readable


def _value(name: str, value) -> str:
    if name == "samplers":
        return ", ".join(sampler_label(n) for n in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def differences(runs: dict[str, Pin]) -> list[dict]:
    """One row per setting whose value differs between ``runs`` (label -> pin): the setting's
    label, then each run's value as text. Empty when every setting agrees."""
    rows = []
    pinned = list(runs.values())
    if len({p.problem for p in pinned}) > 1:
        rows.append({"setting": "problem", **{k: p.problem for k, p in runs.items()}})
    for f in fields(Config):
        values = [getattr(p.config, f.name) for p in pinned]
        if any(v != values[0] for v in values[1:]):
            row = {"setting": LABELS.get(f.name, f.name)}
            row.update({k: _value(f.name, getattr(p.config, f.name)) for k, p in runs.items()})
            rows.append(row)
    if len({p.steps for p in pinned}) > 1:
        rows.append({"setting": "steps done", **{k: f"{p.steps:,}" for k, p in runs.items()}})
    return rows


def summary_rows(runs: dict[str, Pin]) -> list[dict]:
    """One row per sampler and run: its summary numbers as text with four significant digits,
    ``MISSING`` (an em dash) where a run did not measure them (the caption says when)."""
    rows = []
    samplers = list(dict.fromkeys(n for p in runs.values() for n in p.samplers))
    for name in samplers:
        for label, pin in runs.items():
            summary = pin.samplers.get(name)
            if summary is None:
                continue
            row = {"sampler": sampler_label(name), "run": label}
            for key in pins.SUMMARY_FIELDS:
                value = summary.get(key)
                row[pins.SUMMARY_LABELS[key]] = number_text(value, 4)
            rows.append(row)
    return rows


def _narrow(fig):
    """A figure for a column of half the page or less: its legend below the plot, where the
    title cannot run into it."""
    if fig is not None:
        fig.update_layout(
            legend={"orientation": "h", "y": -0.22, "yanchor": "top", "x": 0, "xanchor": "left"},
            margin={"b": 110},
            height=480,
        )
    return fig


def _figures(runs: dict[str, Pin]) -> dict:
    """Every figure of the comparison, built once per selection."""
    overlaid = {
        "ess-bulk": figures.pinned_bars_figure(
            {k: {n: s.get("ess_bulk") for n, s in p.samplers.items()} for k, p in runs.items()},
            "Bulk ESS by run",
            "bulk ESS",
        ),
        "ess-paper": figures.pinned_bars_figure(
            {
                k: {n: s.get("ess_paper_mean") for n, s in p.samplers.items()}
                for k, p in runs.items()
            },
            "Paper ESS by run (mean over chains)",
            "paper ESS",
        ),
    }
    weights = {k: p.weights for k, p in runs.items() if p.weights is not None}
    if weights:
        overlaid["weights"] = figures.pinned_weights_figure(weights)
    per_run = {
        k: {
            "acf": _narrow(figures.acf_figure(p.acf)) if p.acf else None,
            "g": _narrow(figures.balancing_figure(pins.T_GRID, p.g)) if p.g else None,
        }
        for k, p in runs.items()
    }
    return {"overlaid": overlaid, "per_run": per_run}


def _labels(entries) -> dict[str, str]:
    """Option -> label: numbered, so that two pins of one name stay apart in the tables."""
    return {e.pin_id: f"{k}. {e.pin.name}" for k, e in enumerate(entries, start=1)}


def render(run) -> None:
    pin_controls.managed()
    store = pin_controls.session_store()
    entries = store.entries() if store is not None else []
    pin_controls.expired_notice()
    # an RBM's or a network's pin is compared on its own page (its Pinned runs tab)
    kind = kind_of(run.config.target)
    others = [e.pin.name for e in entries if kind_of(e.pin.config.target) is not kind]
    labels = {
        pin_id: label
        for (pin_id, label), e in zip(_labels(entries).items(), entries, strict=True)
        if kind_of(e.pin.config.target) is kind
    }
    pin_controls.others_caption(others)
    if not labels:
        st.info(
            f"No pinned runs {'of this posterior ' if others else ''}yet. Name this run under "
            '"Pin this run" next to the Run button, then pin another (another case, another λ) '
            "to compare them here. Pins are kept on this server for 24 hours, under the pins "
            "parameter of this page's link."
        )
        return
    current = f"Current run (step {run.n_steps:,})"
    options = [CURRENT, *labels]
    names = {CURRENT: current, **labels}
    if COMPARE_RUNS.is_set():  # a deleted or expired pin drops out
        COMPARE_RUNS.set([k for k in COMPARE_RUNS.get() if k in options])
    else:  # the latest pins, with the current run when there is only one
        latest = list(labels)[-MAX_COMPARED:]
        COMPARE_RUNS.set(latest if len(latest) > 1 else [*latest, CURRENT])
    selected = st.multiselect(
        "Runs to compare",
        options,
        format_func=names.get,  # plain text: a multiselect does not render Markdown
        max_selections=MAX_COMPARED,
        key=COMPARE_RUNS.key,
    )
    if len(selected) < 2:
        st.info("Pick two or more runs to compare.")
        return
    pinned = {e.pin_id: e.pin for e in entries}
    runs = {}
    for key in selected:
        if key == CURRENT:
            runs[current] = run.throttled(
                "compare-current", lambda: pins.capture(run, "current run"), max_age_s=5.0
            )
        else:
            runs[labels[key]] = pinned[key]
    built = run.throttled(
        "compare", lambda: _figures(runs), tuple((k, id(p)) for k, p in runs.items())
    )
    st.markdown("**Settings that differ**")
    diff = differences(runs)
    if diff:
        tables.dataframe(diff, hide_index=True)
    else:
        st.caption("Every setting is the same in these runs.")
    st.markdown("**Summary per sampler**")
    tables.dataframe(summary_rows(runs), hide_index=True)
    st.caption(
        f"{MISSING} marks a number the run did not measure. Acceptance: accepted over proposed "
        f"moves, burn-in included. P(move): the chance a step moves at all, measured by the last "
        f"slow-motion Step ({MISSING} without one). ESS and R-hat as in the Mixing view, over the "
        f"mixing phase when the run was pinned ({MISSING} in burn-in; pooled bulk ESS and R-hat "
        f"are {MISSING} when every chain has its own α, as in the paper's cases); bulk ESS per "
        "mixing second divides by the sampling time of the mixing phase."
    )
    overlaid = built["overlaid"]
    left, right = charts.row("compare_ess")
    charts.show(overlaid["ess-bulk"], run, "compare-bulk-ess", left)
    charts.show(overlaid["ess-paper"], run, "compare-paper-ess", right)
    columns = charts.row("compare_runs", len(runs))  # wraps on a narrow page
    for k, (column, (label, figs)) in enumerate(
        zip(columns, built["per_run"].items(), strict=True)
    ):
        with column:
            st.markdown(f"**{escape(label)}**")
            for kind in ("acf", "g"):
                if figs[kind] is None:
                    st.caption(
                        "No autocorrelation yet (pinned in burn-in)."
                        if kind == "acf"
                        else "No locally balanced sampler: no g(t)."
                    )
                else:
                    st.plotly_chart(
                        presentation.figure(figs[kind]),
                        config=charts.config(f"lsb-compare-{k + 1}", kind),
                        key=f"compare_{kind}_{k}",
                    )
    if "weights" in overlaid:
        charts.show(overlaid["weights"], run, "compare-lsb1-weights")
