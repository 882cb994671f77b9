"""View 8, Export: traces (CSV), results (JSON, the experiment command's schema), learned
balancing functions (JSON, importable again as the "learned" sampler), and a link that reopens
this configuration.

Files are built when a download button is clicked (Streamlit runs the callable on another
thread), under the run's lock, so a live run is not slowed by exports nobody asked for.
"""

from __future__ import annotations

import io
from urllib.parse import urlencode

import streamlit as st

import lsbcore
from app.config import Config, to_query_params
from lsbcore import REGISTRY
from lsbcore.figures import sampler_label as label
from lsbcore.results import comparison_results, results_to_json


def traces_csv(traces: dict) -> str:
    """Every sampler's trace as one long-format CSV (``lsbcore.write_traces_csv``)."""
    buffer = io.StringIO()
    lsbcore.write_traces_csv(buffer, traces)
    return buffer.getvalue()


def learned_functions(samplers: dict, meta: dict | None = None) -> dict[str, str]:
    """JSON of each learned balancing function (the learnable samplers'), keyed by sampler name."""
    out = {}
    for name, sampler in samplers.items():
        if REGISTRY[name].learnable:
            info = {"sampler": name, **(meta or {})}
            out[name] = lsbcore.balancing_to_json(sampler.balancing, info)
    return out


def share_link(cfg: Config, base_url: str | None = None) -> str:
    """A URL (relative without ``base_url``) whose query parameters reopen ``cfg``."""
    query = urlencode(to_query_params(cfg), safe=",")
    base = (base_url or "").split("?")[0].split("#")[0]
    return f"{base}?{query}"


def results_json(run, max_lag: int = 500) -> str:
    """The results document of the experiment command (``lsbcore.results``) for this run."""
    config = {**run.config.as_dict(), "problem": run.problem.name}
    with run.lock:
        burnin, mixing = run.phase_seconds()
        results = comparison_results(run.comparison, config, burnin, mixing, max_lag=max_lag)
    return results_to_json(results)


def _locked(run, build):
    def data():
        with run.lock:
            return build()

    return data


def render(run) -> None:
    comparison = run.comparison
    meta = {
        "problem": run.problem.name,
        "steps": run.n_steps,
        "burn_in": run.config.burn_in,
        "config": to_query_params(run.config),
    }
    st.markdown("**Data**")
    row = st.container(horizontal=True)
    row.download_button(
        "Traces (CSV)",
        data=_locked(run, lambda: traces_csv(comparison.traces)),
        file_name="lsb-traces.csv",
        mime="text/csv",
        on_click="ignore",
        disabled=not comparison.traces,
        key="download_traces",
        help="One row per recorded step and chain: step, target evaluations, phase, "
        "magnetisation, log p̃, accuracy, acceptance rate, wall time.",
    )
    row.download_button(
        "Results (JSON)",
        data=lambda: results_json(run),
        file_name="lsb-results.json",
        mime="application/json",
        on_click="ignore",
        key="download_results",
        help="The experiment command's results document: configuration, device, versions, "
        "and per sampler ESS, R-hat, acceptance, accuracy, target evaluations and seconds. "
        "When the chains sample different posteriors (a paper case's own α per chain), "
        "pooled bulk ESS and R-hat are left empty and each chain's own bulk ESS is given.",
    )
    st.markdown("**Learned balancing functions**")
    learned = [n for n in comparison.names if REGISTRY[n].learnable]
    if not learned:
        learners = " or ".join(s.label for s in REGISTRY.values() if s.learnable)
        st.caption(f"Select {learners} to export a learned function.")
    else:
        importer = next((s.label for s in REGISTRY.values() if s.needs_balancing), "Imported")
        row = st.container(horizontal=True)
        for name in learned:
            row.download_button(
                f"{label(name)} (JSON)",
                data=_locked(run, lambda n=name: learned_functions({n: comparison[n]}, meta)[n]),
                file_name=f"lsb-{name}.json",
                mime="application/json",
                on_click="ignore",
                key=f"download_{name}",
                help=f"Import it again with the sampler '{importer}' to reuse it on another image.",
            )
    st.markdown("**Link to this configuration**")
    base = getattr(st.context, "url", None)
    link = share_link(run.config, base)
    st.code(link, language=None, wrap_lines=True)
    if run.config.source == "upload":
        st.caption("The link carries the settings, not the uploaded image: upload it again.")
    st.caption(
        "Opening the link restores every setting in the sidebar; the run itself starts afresh."
    )
