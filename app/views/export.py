"""The Export view of the Ising and network pages: the report (the experiment command's HTML),
results (JSON, its schema), traces (gzip-compressed CSV), learned balancing functions (JSON,
importable again as the "learned" sampler), the figures' format, and a link that reopens this
configuration.

A network run's files carry its own settings only (``config.run_settings``): the Ising
page's settings it keeps for the way back would otherwise set a paper case's Table 2 beside a
Markov network's ESS in its report.

File names carry the problem, its key settings, the seed, a digest of every setting that changes
the result and the date (``file_names.export_stem``), so two runs' files do not overwrite each
other. Files are built when a button is clicked (Streamlit runs the
callable on another thread), under the run's lock, so a live run is not slowed by exports nobody
asked for. Traces are gzip CSV rather than Parquet: the standard library writes it, every tool
reads it, and it needs no columnar-format dependency; the CSV of a default run (46-50 MB)
shrinks about sixfold. They are prepared on request so that the page can show their size before
the download.
"""

from __future__ import annotations

import gzip
import io
import shlex
from urllib.parse import urlencode

import streamlit as st

import lsbcore
from app import charts
from app.config import Config, run_settings, to_query_params
from app.file_names import export_stem
from app.network_run import is_network_run
from app.page_state import EXPORT_TRACES
from lsbcore import REGISTRY
from lsbcore.cases import PAPER_CASES
from lsbcore.studies.experiment.comparison_report import comparison_report
from lsbcore.studies.figures import sampler_label as label
from lsbcore.studies.results import comparison_results, results_to_json


def traces_gzip(traces: dict) -> bytes:
    """``traces_csv`` compressed with gzip (deterministic: no time stamp in the header)."""
    return gzip.compress(traces_csv(traces).encode("utf-8"), compresslevel=6, mtime=0)


def experiment_command(cfg: Config, out: str = "lsb-run") -> tuple[str | None, str]:
    """``(command, "")``: the ``python -m lsbcore.experiment`` line with this run's settings,
    or ``(None, reason)`` when the command cannot express them (it takes the paper's cases
    with their own lambda, mu and sigma, and images with a Gaussian model, not the app's
    photo models; an upload is not a file it can name)."""
    if cfg.source != "paper":
        what = "an uploaded photo" if cfg.source == "upload" else "a shipped sample"
        return None, (
            f"No command line: this run segments {what} with the dashboard's {cfg.model} data "
            "model, which the experiment command does not offer (its --image problems use a "
            "Gaussian model with --mu and --sigma)."
        )
    _, lam, mu, sigma, _ = PAPER_CASES[cfg.case]
    changed = [
        label
        for label, value, paper in (("λ", cfg.lam, lam), ("μ", cfg.mu, mu), ("σ", cfg.sigma, sigma))
        if value != paper
    ]
    changed += ["the boundary"] if cfg.boundary != "periodic" else []
    changed += ["one α for all chains"] if cfg.shared_alpha else []
    if changed:
        return None, (
            f"No command line: this run changes the paper case's {', '.join(changed)}, and the "
            "experiment command runs the paper's cases only with their own settings."
        )
    argv = ["python", "-m", "lsbcore.experiment", "--case", str(cfg.case)]
    argv += ["--samplers", ",".join(cfg.samplers), "--chains", str(cfg.chains)]
    argv += ["--size", str(cfg.size), "--burn-in", str(cfg.burn_in), "--steps", str(cfg.steps)]
    argv += ["--seed", str(cfg.seed), "--start", "shared"]  # the app's chains share a start
    argv += ["--thin", str(cfg.thin)] if cfg.thin != 1 else []
    if any(REGISTRY[n].learnable for n in cfg.samplers):
        argv += ["--lr", f"{cfg.lr:g}", "--optimizer", cfg.optimizer]
        argv += ["--hidden", str(cfg.hidden)] if "lsb2" in cfg.samplers else []
    argv += ["--device", "cuda"] if cfg.device == "cuda" else []
    return shlex.join([*argv, "--out", out]), ""


# why a network run's report has no command line, and what comes closest
NETWORK_COMMAND_NOTE = (
    "No command line: the experiment command's Markov-network study (python -m lsbcore.experiment "
    "--target markov-networks) runs the authors' protocol on MN 1 and MN 2 over seeds, not one "
    "run of the dashboard's."
)


def run_config(run) -> dict:
    """The configuration a run's report and results document give: the settings the run reads
    (``config.run_settings``: every one of an Ising run, a network run's own) and the problem's
    name."""
    return {**run_settings(run.config), "problem": run.problem.name}


def report_html(run) -> str:
    """The experiment command's self-contained report for this run, with the command line
    that runs the same settings (or the sentence saying why none does)."""
    config = run_config(run)
    if is_network_run(run):
        command, reason = None, NETWORK_COMMAND_NOTE
    else:
        command, reason = experiment_command(run.config, export_stem(run))
    if "start" in config and run.config.source == "paper":  # the start setting is the photos';
        config["start"] = "shared"  # a paper case's chains share one start in the app
    if command:
        config["command"] = command
    else:
        config["command_note"] = reason
    burnin, mixing = run.phase_seconds()
    return comparison_report(run.comparison, run.problem, config, burnin, mixing, run.problem.name)


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
    """A URL (relative without ``base_url``) whose query parameters reopen ``cfg``: an RBM's
    or a network's run by its own settings and the speed (the Ising page's, kept in this
    session for the way back, are not the link's to pass on)."""
    params = to_query_params(cfg)
    if cfg.target != "ising":
        own = {*run_settings(cfg), "speed"}
        params = {key: value for key, value in params.items() if key in own}
    query = urlencode(params, safe=",")
    base = (base_url or "").split("?")[0].split("#")[0]
    return f"{base}?{query}"


def results_json(run, max_lag: int = 500) -> str:
    """The results document of the experiment command (``lsbcore.studies.results``) for this run."""
    config = run_config(run)
    with run.lock:
        burnin, mixing = run.phase_seconds()
        results = comparison_results(run.comparison, config, burnin, mixing, max_lag=max_lag)
    return results_to_json(results)


def _traces(run, stem: str) -> None:
    """Prepare the traces (gzip CSV) on request, then offer them with their size."""
    comparison = run.comparison
    prepared = EXPORT_TRACES.get()
    if prepared is not None and prepared[0] != id(run):
        prepared = None  # another run's: dropped below when this one's are prepared
    rows = sum(len(t) * t.n_chains for t in comparison.traces.values())
    if prepared is None:
        if st.button(
            f"Prepare traces ({rows:,} rows)",
            disabled=not comparison.traces,
            key="prepare_traces",
            help="Compress every recorded step of every chain into a gzip CSV; its size shows "
            "before you download it.",
        ):
            with run.lock:
                EXPORT_TRACES.set((id(run), run.n_steps, traces_gzip(comparison.traces)))
            st.rerun()
        return
    _, steps, data = prepared
    if steps != run.n_steps and st.button("Prepare again at the current step", key="reprepare"):
        EXPORT_TRACES.pop()
        st.rerun()
    st.download_button(
        f"Traces at step {steps:,} (gzip CSV, {len(data) / 1e6:.1f} MB)",
        data=data,
        file_name=f"{stem}-traces-step{steps}.csv.gz",
        mime="application/gzip",
        on_click="ignore",
        key="download_traces",
        help="One row per recorded step and chain: step, target evaluations, phase, "
        "magnetisation, log p̃, accuracy, acceptance rate, wall time. Opens in pandas "
        "(read_csv reads .gz directly), R and spreadsheets after unzipping.",
    )


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
    stem = export_stem(run)
    network = is_network_run(run)
    st.markdown("**Report and data**")
    row = st.container(horizontal=True)
    row.download_button(
        "Report (HTML)",
        data=_locked(run, lambda: report_html(run)),
        file_name=f"{stem}-report.html",
        mime="text/html",
        on_click="ignore",
        disabled=not comparison.traces,
        key="download_report",
        help="The experiment command's report for this run: figures, the summary table, the "
        "configuration; one file that opens offline.",
    )
    row.download_button(
        "Results (JSON)",
        data=lambda: results_json(run),
        file_name=f"{stem}-results.json",
        mime="application/json",
        on_click="ignore",
        key="download_results",
        help="The experiment command's results document: configuration, device, versions, "
        "and per sampler ESS, R-hat, acceptance, accuracy, target evaluations and seconds. "
        "When the chains sample different posteriors (a paper case's own α per chain), "
        "pooled bulk ESS and R-hat are left empty and each chain's own bulk ESS is given.",
    )
    _traces(run, stem)
    st.markdown("**Learned balancing functions**")
    learned = [n for n in comparison.names if REGISTRY[n].learnable]
    if not learned:
        learners = " or ".join(s.label for s in REGISTRY.values() if s.app and s.learnable)
        st.caption(f"Select {learners} to export a learned function.")
    else:
        importer = next((s.label for s in REGISTRY.values() if s.needs_balancing), "Imported")
        row = st.container(horizontal=True)
        for name in learned:
            row.download_button(
                f"{label(name)} (JSON)",
                data=_locked(run, lambda n=name: learned_functions({n: comparison[n]}, meta)[n]),
                file_name=f"{stem}-{name}.json",
                mime="application/json",
                on_click="ignore",
                key=f"download_{name}",
                help=f"Import it again with the sampler '{importer}' to reuse it on another image"
                + (" (on the Ising page)." if network else "."),
            )
    figures_and_link(run, stem)


# what a link cannot carry, by the target that needs it, and where it comes from again
NOT_IN_LINK = {
    "uai": "The link carries the settings, not the uploaded network: upload its file again.",
    "own": "The link carries the settings, not your own model: upload its data again to train it.",
}


def figures_and_link(run, stem: str) -> None:
    """Every Export tab's end: the charts' download format, and the link that reopens this
    configuration with what it cannot carry said."""
    st.markdown("**Figures**")
    charts.figure_format()  # a valid value in Session State before the widget reads it
    st.radio(
        "Charts download as",
        charts.FORMATS,
        format_func=str.upper,
        horizontal=True,
        key=charts.FORMAT_KEY,
        help="Every chart's toolbar has a camera button that saves it in this format, named "
        f"{stem}-<figure>.",
    )
    st.markdown("**Link to this configuration**")
    base = getattr(st.context, "url", None)
    link = share_link(run.config, base)
    st.code(link, language=None, wrap_lines=True)
    cfg = run.config
    if cfg.target in NOT_IN_LINK:
        st.caption(NOT_IN_LINK[cfg.target])
    elif cfg.target == "ising" and cfg.source == "upload":
        st.caption("The link carries the settings, not the uploaded image: upload it again.")
    st.caption(
        "Opening the link restores every setting in the sidebar; the run itself starts afresh."
    )
