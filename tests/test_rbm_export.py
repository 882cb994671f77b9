"""The RBM page's Export tab: results and MMD curves that are the run's own (its settings, not
the Ising page's; every checkpoint as recorded), learned functions that load back, and an
experiment command that reruns the same chains: run here, it reaches the same log10 MMD at the
same step.

AppTest runs the real script on a short run of the shipped 8 x 8 digits model.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import shlex
from dataclasses import replace
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import pytest
import torch
from app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse)

from app import config as cfgmod
from app import rbm_run, sources, state
from app.file_names import export_stem
from app.views import rbm_export
from lsbcore import load_balancing
from lsbcore.studies.experiment.cli import main as experiment
from lsbcore.targets.rbm import RBM

SAMPLERS = ("barker", "lsb1", "flsb2", "gwg")
BURN_IN, STEPS = 10, 20
DAY = datetime.date(2026, 12, 1)


def healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture(scope="module")
def digits():
    """A finished run (10 burn-in steps, 20 of mixing) on the 8 x 8 digits, seed 3, learning
    by SGD at rate 0.05 (none the command's default), with an Ising setting changed first
    (lambda 2.5, kept for the way back), on the Export tab."""
    at = open_app(lam="2.5", target="digits-8x8", chains="2", burn_in=str(BURN_IN),
                  steps=str(STEPS), samplers=",".join(SAMPLERS), seed="3", lr="0.05",
                  optimizer="sgd", rbm_view="Export")  # fmt: skip
    healthy(at)
    run = at.session_state["_run"]
    state.advance(run, 60.0, max_steps=BURN_IN + STEPS)
    with run.lock:
        rbm_run.checkpoint(run, force=True)  # a checkpoint at the last step
    at.run()
    healthy(at)
    yield at, run
    state._pause_all_runs()


def test_the_export_tab_offers_results_curves_learned_functions_and_the_command(digits):
    at, run = digits
    assert run.n_steps == BURN_IN + STEPS and run.config.lam == 2.5
    assert (run.config.seed, run.config.lr, run.config.optimizer) == (3, 0.05, "sgd")
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Results (JSON)", "MMD curves (CSV)", "LSB 1 (JSON)", "FLSB 2 (JSON)"]
    codes = [str(c.value) for c in at.code]
    assert codes[0] == rbm_export.rbm_command(run.config, export_stem(run))[0]
    (link,) = [c for c in codes[1:] if "target=digits-8x8" in c]
    params = dict(parse_qsl(urlsplit(link).query))
    assert set(params) == {*cfgmod.run_settings(run.config), "speed"}  # the RBM run's own
    back, warnings = cfgmod.from_query_params(params, sources.sample_names())
    assert warnings == [] and cfgmod.run_settings(back) == cfgmod.run_settings(run.config)
    not_offered = [str(c.value) for c in at.caption if "Ising posterior" in str(c.value)]
    assert not_offered and not any("export" in c for c in not_offered)
    # opened on Export, the tab computed the noise floor: a Results click need not wait for it
    assert run.cache["rbm_floor"] == run.comparison.noise_floor


def test_the_results_are_the_runs_own(digits):
    _, run = digits
    results = json.loads(rbm_export.results_json(run))
    config = results["config"]
    own = cfgmod.run_settings(run.config)
    assert {k: config[k] for k in own} == own and config["problem"] == run.problem.name
    for ising in ("lam", "mu", "sigma", "case", "source", "size", "start", "thin", "epsilon"):
        assert ising not in config, ising
    assert (config["truth_samples"], config["truth_steps"]) == (500, 10_000)
    assert results["steps"] == BURN_IN + STEPS and results["burnin_steps"] == BURN_IN
    assert results["noise_floor_log10"] == pytest.approx(run.comparison.noise_floor)
    assert list(results["samplers"]) == list(SAMPLERS)
    for label, entry in results["samplers"].items():
        curve = run.comparison.curve(label)
        assert entry["curve"].keys() == curve.keys()
        assert all(entry["curve"][k] == pytest.approx(v) for k, v in curve.items())
        assert entry["log10_mmd"] == pytest.approx(curve["log_mmd"][-1])
        assert entry["target_evals"] == run.comparison.samplers[label].n_target_evals


def test_the_curves_csv_holds_every_checkpoint_with_its_phase(digits):
    _, run = digits
    rows = list(csv.DictReader(io.StringIO(rbm_export.curves_csv(run))))
    assert tuple(rows[0]) == rbm_export.CSV_COLUMNS
    for label in SAMPLERS:
        curve = run.comparison.curve(label)
        mine = [r for r in rows if r["sampler"] == label]
        assert [int(r["step"]) for r in mine] == curve["step"]
        assert [int(r["target_evals"]) for r in mine] == curve["evals"]
        assert [float(r["log10_mmd"]) for r in mine] == pytest.approx(curve["log_mmd"], rel=1e-9)
        phases = [r["phase"] for r in mine]
        assert phases == ["burnin" if s <= BURN_IN else "mixing" for s in curve["step"]]
        assert "burnin" in phases and "mixing" in phases


def test_learned_functions_load_back_as_the_runs_own(digits):
    _, run = digits
    files = rbm_export.learned_functions(run)
    assert set(files) == {"lsb1", "flsb2"}
    s = torch.linspace(-20, 20, 81, dtype=torch.float64)
    for label, text in files.items():
        loaded = load_balancing(json.loads(text))
        with torch.no_grad():
            assert torch.allclose(loaded.log_g(s), run.comparison[label].balancing.log_g(s))


def test_the_command_reruns_the_same_chains(digits, tmp_path):
    """The command line the tab shows, run here: every sampler's log10 MMD at the last step is
    the page's own, to rounding."""
    _, run = digits
    command, _ = rbm_export.rbm_command(run.config, str(tmp_path / "out"))
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "lsbcore.experiment"]
    assert experiment([*argv[3:], "--checkpoints", "4", "--quiet"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    for label, figures in results["runs"][0]["samplers"].items():
        curve = figures["curve"]
        assert curve["step"][-1] == BURN_IN + STEPS
        ours = run.comparison.curve(label)
        assert ours["step"][-1] == BURN_IN + STEPS
        assert curve["log_mmd"][-1] == pytest.approx(ours["log_mmd"][-1], abs=1e-12), label
        assert curve["evals"][-1] == ours["evals"][-1]


def test_the_command_is_refused_in_a_sentence_where_it_cannot_rerun_the_run():
    base = replace(cfgmod.defaults_for(target="digits-16x16"), samplers=("barker", "lsb2"))
    command, reason = rbm_export.rbm_command(base)
    assert reason == "" and "--model digits-16x16 --samplers barker,lsb2" in command
    own, _ = rbm_export.rbm_command(replace(base, target="own"), "out", 400, "mine.npz")
    assert "--model mine.npz" in own and own.endswith("--truth-steps 400 --out out")
    refusals = {
        "at least 2 chains": replace(base, chains=1),
        "at least 4 steps": replace(base, steps=3),
        "LSB 2 width is 10": replace(base, hidden=12),
    }
    for words, cfg in refusals.items():
        command, reason = rbm_export.rbm_command(cfg)
        assert command is None and reason.startswith("No command line:") and words in reason
    # the width matters only to a sampler that has one
    command, _ = rbm_export.rbm_command(replace(base, hidden=12, samplers=("barker", "lsb1")))
    assert command is not None


def test_the_command_reruns_your_own_model_from_its_file(tmp_path):
    """Your own model (here a random one, as the RBM page holds a trained one): its ``.npz``
    from the tab, and the command with the ground truth's length the page used (a shorter one
    for a large model; all 10,000 sweeps for this small one), reach the page's log10 MMD."""
    cfg = replace(cfgmod.defaults_for(target="own"), samplers=("barker", "lsb1"), chains=3,
                  burn_in=5, steps=10, seed=2)  # fmt: skip
    run, _ = state.build_rbm_run(cfg, RBM.random(20, 6, seed=4), "your model")
    try:
        state.advance(run, 30.0, max_steps=15)
        with run.lock:
            rbm_run.checkpoint(run, force=True)
        stem = str(tmp_path / "mine")
        (tmp_path / "mine-model.npz").write_bytes(rbm_export.model_file(run))
        command, reason = rbm_export._command(run, stem)
        assert reason == "" and f"--model {stem}-model.npz" in command
        assert experiment([*shlex.split(command)[3:], "--checkpoints", "3", "--quiet"]) == 0
        results = json.loads((tmp_path / "mine" / "results.json").read_text())
        for label, figures in results["runs"][0]["samplers"].items():
            ours = run.comparison.curve(label)
            assert figures["curve"]["step"][-1] == ours["step"][-1] == 15
            assert figures["curve"]["log_mmd"][-1] == pytest.approx(ours["log_mmd"][-1], abs=1e-12)
    finally:
        state._pause_all_runs()


def rbm_run_of(target="digits-8x8", name="digits 8 × 8", model=None, **changes):
    """An RBM run as the download names see it (nothing is sampled)."""
    return SimpleNamespace(
        config=replace(cfgmod.defaults_for(target=target), **changes),
        problem=SimpleNamespace(name=name, target=model, data=None),
        source=None,
        cache={},
    )


def test_rbm_file_names_change_with_the_runs_settings_and_its_own_model_only():
    base = export_stem(rbm_run_of(), DAY)
    for ising in ({"lam": 2.0}, {"case": 1}, {"thin": 5}, {"epsilon": 0.1}):
        assert export_stem(rbm_run_of(**ising), DAY) == base, ising
    names = {export_stem(rbm_run_of(**c), DAY) for c in ({"chains": 3}, {"seed": 2}, {"lr": 0.1})}
    assert len(names | {base}) == 4

    def own(seed):
        return rbm_run_of("own", "your model", RBM.random(16, 8, seed=seed))

    assert export_stem(own(0), DAY) == export_stem(own(0), DAY)
    assert export_stem(own(0), DAY) != export_stem(own(1), DAY)
