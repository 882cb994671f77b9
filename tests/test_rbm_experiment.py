"""The RBM experiment command: the GWG code's ESS by hand, the checkpoint grid, an end-to-end
run through ``python -m lsbcore.experiment --target rbm-digits`` and its generated section."""

import copy
import json
import math

import numpy as np
import pytest

import lsbcore.studies.rbm.report as report
from lsbcore.rbm.models import save_model
from lsbcore.rbm.variants import evals_per_step
from lsbcore.studies.experiment.cli import main as experiment
from lsbcore.studies.rbm.experiment import gwg_ess, log_grid, reach_floor
from lsbcore.targets.rbm import RBM


def direct_ess(x: np.ndarray) -> float:
    """TensorFlow Probability's default ESS of one series, term by term."""
    t = len(x)
    y = x - x.mean()
    c = [float(np.dot(y[: t - k], y[k:])) / t for k in range(t)]
    total = 0.0
    for k in range(t):
        rho = c[k] / c[0]
        if rho < 0:
            break
        total += rho
    return t / (-1 + 2 * total)


def test_gwg_ess_matches_its_definition_term_by_term():
    rng = np.random.default_rng(0)
    walk = np.cumsum(rng.normal(size=(60, 3)), axis=0)  # strongly autocorrelated
    noise = rng.normal(size=(60, 1))
    series = np.hstack([walk, noise])
    expected = [direct_ess(series[:, j]) for j in range(4)]
    assert gwg_ess(series) == pytest.approx(expected, rel=1e-10)
    assert gwg_ess(series)[:3].max() < 15 < gwg_ess(series)[3]


def test_gwg_ess_of_a_constant_is_one_and_of_an_alternation_is_its_length():
    t = 50
    series = np.stack([np.ones(t), (-1.0) ** np.arange(t)], 1)
    assert gwg_ess(series).tolist() == [1.0, float(t)]  # rho_1 = -1 < 0: only lag 0 counts
    with pytest.raises(ValueError, match="T >= 2"):
        gwg_ess(np.ones((1, 3)))


def test_the_checkpoints_lie_on_a_log_grid_with_the_end_of_burn_in():
    grid = log_grid(12_000, 10, 2_000)
    assert grid[0] == 0 and grid[-1] == 12_000 and 2_000 in grid
    assert grid == sorted(set(grid))
    steps = np.array([s for s in grid if s not in (0, 2_000)], dtype=float)
    assert np.allclose(np.diff(np.log(steps)), np.log(12_000) / 9, rtol=0.05, atol=0.02)


def test_reach_floor_takes_the_first_checkpoint_at_or_below_the_level():
    curve = {"step": [0, 10, 20, 30], "evals": [1, 11, 21, 31], "seconds": [0, 1, 2, 3],
             "log_mmd": [-1.0, -1.5, -2.2, -1.9]}  # fmt: skip
    assert reach_floor(curve, -2.0) == {"step": 20, "evals": 21, "seconds": 2}
    assert reach_floor(curve, -3.0) == {"step": None, "evals": None, "seconds": None}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, single_thread):
    folder = tmp_path_factory.mktemp("rbm")
    rbm = RBM.random(16, 6, seed=0, scale=0.8)
    save_model(rbm, folder / "model.npz")
    doc = folder / "reproduction.md"
    doc.write_text("# Ising part\n\ntext\n", encoding="utf-8")
    argv = ["--target", "rbm-digits", "--model", str(folder / "model.npz"), "--samplers",
            "flsb1,flsb2,gwg,gibbs-2,hb-10-1", "--burn-in", "30", "--steps", "60", "--chains",
            "4", "--seeds", "2", "--checkpoints", "8", "--truth-samples", "60",
            "--truth-steps", "20", "--out", str(folder / "out"), "--docs", str(doc),
            "--quiet"]  # fmt: skip
    assert experiment(argv) == 0
    results = json.loads((folder / "out" / "results.json").read_text())
    return results, doc, argv


def test_every_seed_runs_every_sampler_from_burn_in_to_sampling(tiny_run):
    results, _, _ = tiny_run
    assert [r["seed"] for r in results["runs"]] == [0, 1]
    grid = log_grid(90, 8, 30)
    for run in results["runs"]:
        for label, figures in run["samplers"].items():
            curve = figures["curve"]
            assert curve["step"] == grid
            assert len(curve["log_mmd"]) == len(grid)
            # sampling costs the counting rule's evaluations per step
            assert figures["evals_per_step_mixing"] == evals_per_step(label, 16)
            assert figures["ess_draws"] == 60
            assert figures["ess_per_eval"] == pytest.approx(
                figures["ess_dims_mean"] / (60 * evals_per_step(label, 16))
            )
    floor = results["floor"]
    assert len(floor["draws"]) == 20
    assert results["floor_level"] == pytest.approx(floor["mean"] + floor["std"])


def test_the_generated_section_states_each_claim_and_replaces_itself(tiny_run, tmp_path):
    results, doc, argv = tiny_run
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Ising part\n\ntext\n")
    assert text.count(report.BEGIN) == text.count(report.END) == 1
    for claim in ("FLSB 1 performs like GWG", "far fewer target evaluations",
                  "fewer evaluations than the block samplers", "Table 4's evaluations",
                  "ESS per second is below"):  # fmt: skip
        assert claim in text
    assert f"{results['floor']['mean']:.3f} ± {results['floor']['std']:.3f}" in text
    assert "Gibbs-2 4 (paper 4)" in text and "HB-10-1 11 (paper 20)" in text
    # rewriting replaces the section in place; the Ising generator keeps it
    report.write_section(doc, report.section(results))
    again = doc.read_text(encoding="utf-8")
    assert again.count(report.BEGIN) == 1 and again.startswith("# Ising part")
    assert report.keep_section(again) == report.section(results)


def _with_floor_steps(results: dict, burn_in: int, steps: dict) -> dict:
    """``results`` with its burn-in and each named sampler's step to the floor set (every seed)."""
    changed = copy.deepcopy(results)
    changed["config"]["burn_in"] = burn_in
    for run in changed["runs"]:
        for label, step in steps.items():
            run["samplers"][label]["reach_floor"]["step"] = step
    return changed


def test_an_evaluations_claim_is_inconclusive_when_the_floor_comes_before_learning(tiny_run):
    """The issue's 8 x 8 case: the floor at about 60 steps of a 2,400-step burn-in says nothing
    about what learning buys; past a tenth of the burn-in the race is judged again."""
    results, _, _ = tiny_run
    early = _with_floor_steps(results, 2400, {"flsb1": 58, "flsb2": 61, "gwg": 42})
    assert report.floor_before_learning(early, ("flsb2", "gwg")) == pytest.approx(61 / 2400)
    text = report.section(early)
    line = next(x for x in text.splitlines() if "far fewer target evaluations" in x)
    assert "against GWG inconclusive: both reached the floor within 2.5% of the burn-in" in line
    assert "against FLSB 1 inconclusive" in line and "does not hold" not in line
    late = _with_floor_steps(results, 2400, {"flsb1": 580, "flsb2": 610, "gwg": 420})
    assert report.floor_before_learning(late, ("flsb2", "gwg")) is None  # 25% of the burn-in
    line = next(x for x in report.section(late).splitlines() if "far fewer target" in x)
    assert "inconclusive" not in line
    assert ("against GWG holds" in line) or ("against GWG does not hold" in line)
    # a sampler that never reached the floor leaves the claim to the ratios
    never = _with_floor_steps(results, 2400, {"flsb2": None, "gwg": 42})
    assert report.floor_before_learning(never, ("flsb2", "gwg")) is None


def test_bad_arguments_are_refused_by_the_command(tmp_path, capsys):
    with pytest.raises(SystemExit):
        experiment(["--target", "rbm-digits", "--samplers", "gibbs-3"])
    assert "unknown sampler" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        experiment(["--target", "rbm-digits", "--model", str(tmp_path / "none.npz")])
    assert "--model" in capsys.readouterr().err


def test_the_benchmark_stops_at_the_first_checkpoint_at_or_below_the_level():
    from lsbcore.studies.rbm.bench import time_to_floor

    rbm = RBM.random(12, 4, seed=1)
    truth = rbm.gibbs(50, 20, seed=0)
    first = time_to_floor(rbm, "gwg", 4, 0, truth, math.inf, 10.0, 100)
    assert first["steps"] == 1 and first["evals"] == 1 + 1  # the start's evaluation and one step
    never = time_to_floor(rbm, "gibbs-2", 4, 0, truth, -math.inf, 10.0, 100)
    assert never == {"steps": None, "evals": None, "seconds": None}
