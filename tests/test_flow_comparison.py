"""The flow paper's denoising comparison: the problems (the digit, seeded noise, Bishop's Ising
posterior), one sampler's measurement (its accounting, its seeding, its samples against the
exact law of a 3x3 posterior), and the command end to end on its quick protocol."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from lsbcore.exact.states import all_states, exact_distribution
from lsbcore.rbm.data import digits
from lsbcore.studies.experiment.cli import main as experiment_main
from lsbcore.studies.flows.comparison import Protocol, compare, measure, over_common_sites, train
from lsbcore.studies.flows.denoising import BETA, ETA, DenoisingProblem, denoising_problem
from lsbcore.studies.flows.report import BEGIN, TITLE
from lsbcore.targets.ising import IsingPosterior


@pytest.fixture(autouse=True)
def one_thread():
    """The flows' small matrices run fastest on one thread; two oversubscribe a loaded
    2-core machine many times over. The previous setting is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ----------------------------------------------------------------------------- the problems
def test_the_clean_image_is_the_shipped_digit_and_the_noise_is_seeded():
    problem = denoising_problem(8, 3, seed=5)
    images, labels = digits(8)
    assert torch.equal(problem.clean.flatten(), torch.from_numpy(2.0 * images[3] - 1.0))
    assert problem.label == labels[3]
    again, other = denoising_problem(8, 3, seed=5), denoising_problem(8, 3, seed=6)
    assert torch.equal(again.noisy, problem.noisy)
    assert not torch.equal(other.noisy, problem.noisy)
    assert problem.flipped == int((problem.clean != problem.noisy).sum()) > 0
    assert set(problem.noisy.unique().tolist()) <= {-1.0, 1.0}


def test_the_noise_flips_about_a_tenth_of_the_pixels():
    flipped = [denoising_problem(16, i, seed=i).flipped for i in range(40)]
    rate = np.mean(flipped) / 256  # 10,240 pixels: the sd of the rate is 0.003
    assert abs(rate - 0.1) < 0.012


def test_the_posterior_is_bishops_ising_energy():
    problem = denoising_problem(8, 0, seed=1)
    assert (BETA, ETA) == (1.0, 2.1)
    t = torch.where(torch.rand(5, 8, 8, generator=torch.Generator().manual_seed(0)) < 0.5,
                    -1.0, 1.0).double()  # fmt: skip
    x = problem.noisy
    pairs = (t[:, 1:, :] * t[:, :-1, :]).sum((1, 2)) + (t[:, :, 1:] * t[:, :, :-1]).sum((1, 2))
    minus_energy = BETA * pairs + ETA * (t * x).sum((1, 2))
    got = problem.target.log_prob(t.reshape(5, 64))
    assert torch.allclose(got, minus_energy)


@pytest.mark.parametrize("kwargs", [{"size": 12}, {"index": 1797}, {"flip": 0.7}])
def test_a_problem_outside_the_bounds_is_refused_in_a_sentence(kwargs):
    with pytest.raises(ValueError):
        denoising_problem(**kwargs)


# ----------------------------------------------------------------------------- one sampler
def tiny_problem(lam=0.4) -> DenoisingProblem:
    """A 3x3 posterior (512 states: enumerable) in the shape the comparison takes."""
    noisy = torch.tensor([[1.0, -1, 1], [1, 1, -1], [-1, 1, 1]], dtype=torch.float64)
    target = IsingPosterior(0.6 * noisy, lam)
    return DenoisingProblem(3, 0, 0, 0.1, lam, 0.6, 0, noisy, noisy, target)


def exact_mean_log_p(problem) -> float:
    pi = exact_distribution(problem.target)
    return float((pi * problem.target.log_prob(all_states(9)).numpy()).sum())


SHORT = Protocol(chains=16, steps=6000, burn_in=300, short_steps=600, short_burn_in=50,
                 flow_steps=400, draws=200, train_steps=60, batch=64, importance=2)  # fmt: skip


@pytest.mark.parametrize("name", ["gibbs", "checkerboard"])
def test_a_baselines_samples_have_the_exact_mean_log_p(name):
    problem = tiny_problem()
    figures = measure(problem, name, SHORT, seed=0)
    exact = exact_mean_log_p(problem)
    # draws x chains samples, ESS at least a few hundred: the standard error is below 0.15
    assert figures["ess"] > 300
    assert abs(figures["mean_log_p"] - exact) < 4 * figures["std_log_p"] / np.sqrt(figures["ess"])


def test_flow_exact_is_exact_whatever_the_flow_and_its_accounting_is_its_own():
    problem = tiny_problem()
    flow = train(problem, SHORT, seed=1)
    assert flow.steps == SHORT.train_steps and flow.seconds > 0 and np.isfinite(flow.elbo)
    figures = measure(problem, "flow-exact", SHORT, seed=1, flow=flow)
    exact = exact_mean_log_p(problem)
    assert abs(figures["mean_log_p"] - exact) < 4 * figures["std_log_p"] / np.sqrt(figures["ess"])
    assert figures["burn_in"] == 0 and figures["steps"] == SHORT.flow_steps
    assert figures["cost_before_seconds"] == flow.seconds  # the training, not a burn-in
    assert figures["evals_per_chain"] == figures["steps"] * figures["evals_per_step"] == 400
    chain_steps = figures["steps"] * SHORT.chains
    assert figures["ess_per_1e4"] == pytest.approx(figures["ess"] * 1e4 / chain_steps)
    assert figures["ess_per_1000_evals"] == pytest.approx(figures["ess"] * 1000 / chain_steps)
    assert figures["ess_per_min"] == pytest.approx(figures["ess"] * 60 / figures["seconds"])
    assert figures["ess_per_min_total"] == pytest.approx(
        figures["ess"] * 60 / (figures["seconds"] + flow.seconds)
    )
    assert 0.0 < figures["accept"] <= 1.0
    assert figures["draws"] == SHORT.draws and figures["kept_samples"] == 200 * 16


def test_flow_latents_acceptance_counts_proposals_not_sites():
    problem = tiny_problem()
    flow = train(problem, SHORT, seed=2)
    figures = measure(problem, "flow-latent", SHORT, seed=2, flow=flow)
    assert 0.0 < figures["accept"] <= 1.0


def test_one_seed_gives_the_same_figures_and_burn_in_is_the_baselines_cost_before():
    problem = tiny_problem()
    a, b = (measure(problem, "metropolis", SHORT, seed=3) for _ in range(2))
    for key in ("ess", "mean_log_p", "accept", "frozen_sites", "evals_per_chain"):
        assert a[key] == b[key]
    assert a["burn_in"] == SHORT.burn_in and a["steps"] == SHORT.steps
    # one site proposed per step: the acceptance is the sites changed per step
    assert 0.0 < a["accept"] < 1.0
    c = measure(problem, "metropolis", SHORT, seed=4)
    assert c["mean_log_p"] != a["mean_log_p"]


def test_a_site_that_never_moves_is_counted_frozen_not_averaged():
    field = torch.zeros(3, 3, dtype=torch.float64)
    field[0, 0], field[2, 1] = 40.0, -40.0  # p(flip) ~ e^-80: never within the run
    target = IsingPosterior(field, 0.0)
    problem = DenoisingProblem(3, 0, 0, 0.1, 0.0, 1.0, 0, field.sign(), field.sign(), target)
    figures = measure(problem, "gibbs", SHORT, seed=0)
    assert figures["frozen_sites"] == 2
    # the 7 free sites are fair coins resampled at random: thinned by 30 steps (> 3 sweeps)
    # their draws are nearly independent, so the ESS is near the kept samples
    assert figures["ess"] > 0.6 * figures["kept_samples"]


def test_samplers_are_compared_on_the_sites_any_of_them_moved_unmoved_ones_counting_zero():
    def figures(sites, groups=()):
        return {"ess_sites": sites, "steps": 100, "chains": 2, "evals_per_chain": 500,
                "seconds": 2.0, "cost_before_seconds": 1.0, "draws": 50, "group": 2,
                "ess_group_sites": list(groups)}  # fmt: skip

    groups = [[10.0, None, 30.0, None], [20.0, None, None, None]]
    samplers = {"a": figures([10.0, None, 30.0, None], groups),
                "b": figures([None, None, 50.0, None])}  # fmt: skip
    assert over_common_sites(samplers) == [0, 2]
    a, b = samplers["a"], samplers["b"]
    assert (a["ess"], b["ess"]) == (20.0, 25.0)
    assert (a["unmoved_common_sites"], b["unmoved_common_sites"]) == (0, 1)
    assert b["ess_per_1e4"] == 25.0 * 1e4 / 200 and b["ess_per_1000_evals"] == 25.0
    assert b["ess_per_min"] == 25.0 * 30 and b["ess_per_min_total"] == 25.0 * 20
    # the paper's figure: each group of chains on the same sites, per 10^4 of its 50 x 2 kept
    # samples: (10 + 30) / 2 and (20 + 0) / 2 -> 2000 and 1000, mean 1500 ± 500 (s.e.)
    assert a["ess_per_1e4_kept_groups"] == [2000.0, 1000.0]
    assert a["ess_per_1e4_kept"] == 1500.0 and a["ess_per_1e4_kept_se"] == pytest.approx(500.0)
    assert b["ess_per_1e4_kept"] is None


def test_the_ess_per_kept_sample_is_computed_per_group_of_chains():
    problem = tiny_problem()
    protocol = replace(SHORT, group=2)
    figures = measure(problem, "gibbs", protocol, seed=0)
    groups = figures["ess_group_sites"]
    assert len(groups) == protocol.chains // 2 and all(len(g) == problem.n_sites for g in groups)
    # a group's ESS is bounded by its own kept samples (of 2 chains), not those of all 16
    top = max(v for g in groups for v in g if v is not None)
    assert top <= 1.2 * figures["draws"] * 2


def test_compare_refuses_unknown_samplers():
    with pytest.raises(ValueError, match="samplers must be among"):
        compare(tiny_problem(), SHORT, [0], samplers=["gibbs", "nope"])


# ----------------------------------------------------------------------------- the command
def test_the_quick_command_writes_its_results_and_its_section(tmp_path, capsys):
    docs = tmp_path / "reproduction.md"
    docs.write_text("# Reproduction\n", encoding="utf-8")
    code = experiment_main(["--target", "flow-denoising", "--quick", "--sizes", "8",
                            "--samplers", "flow-latent,gibbs,checkerboard", "--out",
                            str(tmp_path / "out"), "--docs", str(docs)])  # fmt: skip
    assert code == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert list(results["problems"]) == ["8"]
    run = results["problems"]["8"]["runs"][0]
    assert set(run["samplers"]) == {"flow-latent", "gibbs", "checkerboard"}
    assert run["flow"]["steps"] == results["config"]["protocol"]["train_steps"]
    text = docs.read_text(encoding="utf-8")
    assert text.startswith("# Reproduction\n") and BEGIN in text and TITLE in text
    assert f"{run['samplers']['gibbs']['ess_per_1e4']:.3f}" in text
    assert "8x8" in capsys.readouterr().err
    # the section again from the stored results, without running
    again = tmp_path / "again.md"
    stored = str(tmp_path / "out" / "results.json")
    code = experiment_main(
        ["--target", "flow-denoising", "--from-results", stored, "--docs", str(again)]
    )
    assert code == 0
    assert again.read_text(encoding="utf-8") == text.removeprefix("# Reproduction\n\n")


@pytest.mark.parametrize("bad", [["--sizes", "12"], ["--samplers", "gibbs,nope"],
                                 ["--seeds", "0"]])  # fmt: skip
def test_the_command_refuses_bad_arguments(bad, capsys):
    with pytest.raises(SystemExit) as stop:
        experiment_main(["--target", "flow-denoising", "--quick", *bad])
    assert stop.value.code == 2
    assert "error" in capsys.readouterr().err
