"""The RBM page's Export view: the run's results (JSON: its settings, and per sampler the MMD
checkpoints, acceptance, hop distance, evaluations and seconds, with the noise floor), the MMD
curves (CSV), your own model (``.npz``), the learned balancing functions (JSON, importable on the
Ising page), the experiment command that reruns it, the figures' format and the link.

The RBM experiment command (``python -m lsbcore.experiment --target rbm-digits``) draws the
same start and the same sampler streams from the seed as the page's run, so with the command's
options it reproduces the run's chains exactly (tested: equal log-MMD at the same step), on a
shipped model or on your own (its ``.npz``, offered here, and its ground truth's length); its
checkpoints are on its own log grid of steps. Files are built when a button is
clicked, under the run's lock. The noise floor the results carry (seconds of exact Gibbs
sampling) is computed when the tab is first drawn, with a note, unless the MMD tab has.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shlex

import streamlit as st

import lsbcore
from app import rbm_targets
from app.config import Config, run_settings
from app.file_names import export_stem
from app.views.export import figures_and_link
from app.views.rbm_mmd import floor_of
from lsbcore.rbm.ground_truth import TRUTH_STEPS
from lsbcore.studies.results import describe_device, json_safe, versions

CSV_COLUMNS = ("sampler", "step", "phase", "target_evals", "seconds", "log10_mmd")
DEFAULT_HIDDEN = 10  # the width the command's LSB 2 and FLSB 2 use (it has no option for it)


def rbm_command(
    cfg: Config, out: str = "lsb-rbm", truth_steps: int = TRUTH_STEPS, model: str = "model.npz"
) -> tuple[str | None, str]:
    """``(command, "")``: the ``python -m lsbcore.experiment --target rbm-digits`` line that
    reruns this run's chains (on your own model: its file ``model``, the Model download, with
    the ground truth's ``truth_steps``), or ``(None, reason)`` when the command cannot."""
    if cfg.chains < 2:
        return None, "No command line: the experiment command runs at least 2 chains."
    if cfg.steps < 4:
        return None, "No command line: the experiment command samples at least 4 steps."
    if cfg.hidden != DEFAULT_HIDDEN and any(_takes_hidden(n) for n in cfg.samplers):
        return None, (
            f"No command line: the experiment command's LSB 2 width is {DEFAULT_HIDDEN}, and "
            f"this run's is {cfg.hidden}."
        )
    shipped = cfg.target in rbm_targets.SHIPPED
    argv = ["python", "-m", "lsbcore.experiment", "--target", "rbm-digits"]
    argv += ["--model", cfg.target if shipped else model]
    argv += ["--samplers", ",".join(cfg.samplers), "--chains", str(cfg.chains)]
    argv += ["--burn-in", str(cfg.burn_in), "--steps", str(cfg.steps), "--seed", str(cfg.seed)]
    argv += ["--lr", f"{cfg.lr:g}", "--optimizer", cfg.optimizer]
    # a large own model's truth is drawn shorter, to be ready within seconds (build_rbm_run)
    argv += ["--truth-steps", str(truth_steps)] if truth_steps != TRUTH_STEPS else []
    return shlex.join([*argv, "--out", out]), ""


def model_file(run) -> bytes:
    """Your own model as the ``.npz`` the experiment command's ``--model`` reads."""
    from lsbcore.rbm.models import model_arrays, npz_bytes

    meta = {"problem": run.problem.name, "made_by": "LSB Explorer"}
    return npz_bytes(model_arrays(run.problem.target, meta))


def _command(run, stem: str) -> tuple[str | None, str]:
    """This run's command line, its own model's file named as the page offers it."""
    return rbm_command(run.config, stem, run.comparison.truth_steps, f"{stem}-model.npz")


def _takes_hidden(label: str) -> bool:
    spec = lsbcore.REGISTRY[rbm_targets.registry_name(label)]
    return any(option.name == "hidden" for option in spec.options)


def _floor(run) -> float:
    """The noise floor of this run's chain count (computed once per run, as the MMD tab does)."""
    if "rbm_floor" not in run.cache:
        run.cache["rbm_floor"] = run.comparison.noise_floor
    return run.cache["rbm_floor"]


def results(run) -> dict:
    """The run as a JSON-ready document: its settings, device, versions, noise floor and per
    sampler its checkpoints and move statistics."""
    from lsbcore.rbm.variants import display_name

    floor = _floor(run)
    comparison = run.comparison
    command, reason = _command(run, export_stem(run))
    config = {**run_settings(run.config), "problem": run.problem.name}
    config["model_description"] = comparison.rbm.describe()
    config["truth_samples"] = len(comparison.truth)
    config["truth_steps"] = comparison.truth_steps
    config["command" if command else "command_note"] = command or reason
    with run.lock:
        samplers = {}
        for label, sampler in comparison.samplers.items():
            curve = comparison.curve(label)
            samplers[label] = {
                "name": display_name(label),
                "accept_rate": sampler.accept_rate,
                "hop_distance": comparison.hop_distance(label),
                "target_evals": int(sampler.n_target_evals),
                "wall_seconds": float(sampler.wall_seconds),
                "log10_mmd": curve["log_mmd"][-1] if curve["log_mmd"] else None,
                "curve": curve,
            }
        steps, burn_in = comparison.n_steps, comparison.burnin_steps
    return json_safe(
        {
            "config": config,
            "device": describe_device(comparison.device),
            "versions": versions(),
            "steps": steps,
            "burnin_steps": burn_in,  # None while burning in
            "noise_floor_log10": floor if math.isfinite(floor) else None,
            "samplers": samplers,
        }
    )


def results_json(run) -> str:
    return json.dumps(results(run), indent=2, allow_nan=False)


def curves_csv(run) -> str:
    """Every sampler's MMD checkpoints as one long-format CSV (``CSV_COLUMNS``); a checkpoint
    is in burn-in up to the step burn-in ended at (the configured one while it goes on)."""
    comparison = run.comparison
    buffer = io.StringIO()
    out = csv.writer(buffer, lineterminator="\n")
    out.writerow(CSV_COLUMNS)
    with run.lock:
        end = comparison.burnin_steps
        end = run.config.burn_in if end is None else end
        for label in comparison.labels:
            c = comparison.curve(label)
            for step, evals, seconds, value in zip(
                c["step"], c["evals"], c["seconds"], c["log_mmd"], strict=True
            ):
                phase = "burnin" if step <= end and end > 0 else "mixing"
                out.writerow([label, step, phase, evals, f"{seconds:.6g}", f"{value:.10g}"])
    return buffer.getvalue()


def learned_function(run, label: str) -> str:
    """JSON of the learned balancing function of the variant ``label``."""
    comparison = run.comparison
    info = {"sampler": label, "problem": run.problem.name}
    with run.lock:
        info["steps"] = comparison.n_steps
        return lsbcore.balancing_to_json(comparison.samplers[label].balancing, info)


def learned_functions(run) -> dict[str, str]:
    """JSON of each learned balancing function, by variant label."""
    labels = [label for label in run.comparison.labels if rbm_targets.learnable(label)]
    return {label: learned_function(run, label) for label in labels}


def render(run) -> None:
    from lsbcore.rbm.variants import display_name

    stem = export_stem(run)
    note = st.empty()  # while the noise floor is computed (below, once the tab is drawn)
    st.markdown("**Results and data**")
    row = st.container(horizontal=True)
    row.download_button(
        "Results (JSON)",
        data=lambda: results_json(run),
        file_name=f"{stem}-results.json",
        mime="application/json",
        on_click="ignore",
        key="rbm_download_results",
        help="The settings, the device and versions, the noise floor, and per sampler its MMD "
        "checkpoints, acceptance, hop distance, target evaluations and sampling seconds.",
    )
    row.download_button(
        "MMD curves (CSV)",
        data=lambda: curves_csv(run),
        file_name=f"{stem}-mmd.csv",
        mime="text/csv",
        on_click="ignore",
        key="rbm_download_curves",
        help="One row per sampler and checkpoint: step, phase, target evaluations per chain, "
        "sampling seconds and log10 MMD against the ground truth.",
    )
    own = run.config.target not in rbm_targets.SHIPPED
    if own:
        row.download_button(
            "Model (.npz)",
            data=lambda: model_file(run),
            file_name=f"{stem}-model.npz",
            mime="application/octet-stream",
            on_click="ignore",
            key="rbm_download_model",
            help="Your own model's weights and biases, as the experiment command's --model "
            "reads them (and lsbcore.rbm.models.load_model).",
        )
    command, reason = _command(run, stem)
    if command:
        st.code(command, language="bash", wrap_lines=True)
        on_gpu = getattr(run.comparison.device, "type", "cpu") == "cuda"
        st.caption(
            "This command reruns the same chains from the same seed (the same log10 MMD at the "
            "same step); it records its checkpoints on its own log grid and adds the ESS."
            + (" Save the model file (Model, above) beside it first." if own else "")
            + (
                " It samples on the CPU, and this run on the GPU: expect the same law, not the "
                "same draws."
                if on_gpu
                else ""
            )  # fmt: skip
        )
    else:
        st.caption(reason)
    st.markdown("**Learned balancing functions**")
    learned = [label for label in run.comparison.labels if rbm_targets.learnable(label)]
    if not learned:
        learners = [display_name(n) for n in rbm_targets.labels() if rbm_targets.learnable(n)]
        st.caption(f"Select {', '.join(learners)} to export a learned function.")
    else:
        row = st.container(horizontal=True)
        for label in learned:
            row.download_button(
                f"{display_name(label)} (JSON)",
                data=lambda n=label: learned_function(run, n),
                file_name=f"{stem}-{label}.json",
                mime="application/json",
                on_click="ignore",
                key=f"rbm_download_{label}",
                help="Import it with the sampler 'Imported' on the Ising page.",
            )
    figures_and_link(run, stem)
    if "rbm_floor" not in run.cache:  # the results carry it: computed now, not on the click
        floor_of(run, note, "the results file carries it")
