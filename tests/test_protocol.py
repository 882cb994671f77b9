"""The experiment's protocols (spec / authors), per-chain starts and runs over several seeds."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from lsbcore import CSV_COLUMNS, paper_case
from lsbcore.diagnostics.mixing import ess_bulk_per_chain, summarise_mixing
from lsbcore.studies.experiment import ArrayTrace, main
from lsbcore.studies.experiment.paper_protocol import ess_series, resolve_protocol
from lsbcore.studies.results import effective_max_lag

BURN_IN, STEPS, CHAINS = 20, 120, 3
AUTHORS = ["--case", "4", "--size", "6", "--chains", str(CHAINS), "--burn-in", str(BURN_IN)]
AUTHORS += ["--steps", str(STEPS), "--protocol", "authors", "--csv-thin", "1", "--quiet"]
AUTHORS += ["--workers", "1"]


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def load(out):
    return json.loads((out / "results.json").read_text())


def magnetisation_records(out, name):
    """(step [T], magnetisation [T, B]) of one sampler from traces.csv."""
    with open(out / "traces.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in list(csv.reader(f))[1:] if r[0] == name]
    step_col, m_col = CSV_COLUMNS.index("step"), CSV_COLUMNS.index("magnetisation")
    steps = np.array([int(r[step_col]) for r in rows]).reshape(-1, CHAINS)[:, 0]
    m = np.array([float(r[m_col]) for r in rows]).reshape(-1, CHAINS)
    return steps, m


@pytest.fixture(scope="module")
def authors_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("authors")
    assert main([*AUTHORS, "--samplers", "barker,lsb2", "--out", str(out)]) == 0
    return out


# ----------------------------------------------------------------------------- resolution
@pytest.mark.parametrize(
    ("case", "burn_in", "ess_from", "lag"),
    [(1, 2000, 1000, 500), (2, 800, 400, 400), (3, 2000, 1000, 500), (4, 800, 400, 100)],
)
def test_authors_protocol_resolves_their_scripts_numbers(case, burn_in, ess_from, lag):
    protocol = resolve_protocol("authors", case)
    assert (protocol.burn_in, protocol.ess_from_step, protocol.max_lag) == (burn_in, ess_from, lag)
    assert protocol.steps_per_burnin_iteration("lsb2") == 2
    assert protocol.steps_per_burnin_iteration("lsb1") == 1
    assert protocol.burn_in_source == "protocol"


def test_spec_protocol_is_the_mixing_phase_with_l_500_and_an_explicit_burn_in_overrides():
    spec = resolve_protocol("spec", 4)
    assert (spec.burn_in, spec.ess_from_step, spec.max_lag, spec.burnin_steps) == (
        2000, 2000, 500, {}
    )  # fmt: skip
    own = resolve_protocol("authors", 2, burn_in=300)
    assert (own.burn_in, own.ess_from_step, own.burn_in_source) == (300, 150, "--burn-in")
    with pytest.raises(ValueError, match="protocol must be one of"):
        resolve_protocol("paper", 1)
    with pytest.raises(ValueError, match="paper's cases only"):
        resolve_protocol("authors", None, burn_in=10)


# ----------------------------------------------------------------------------- the window
def recorded(steps_per_burnin: int, burn_in: int, mixing: int) -> ArrayTrace:
    """A trace whose magnetisation is its step number (every chain), one record per step."""
    last_burn = burn_in * steps_per_burnin
    step = np.arange(last_burn + mixing + 1)
    trace = ArrayTrace(2)
    values = np.zeros((step.size, len(trace.fields), 2), dtype=np.float32)  # [T, F, B]
    values[:, trace.fields.index("magnetisation")] = step[:, None]
    phase = (step > last_burn).astype(np.int8)
    zeros = np.zeros(step.size)
    trace.extend(step, values, zeros, zeros, zeros, phase)
    return trace


def test_ess_series_keeps_iterations_after_the_window_start_one_record_per_iteration():
    trace = recorded(2, burn_in=10, mixing=5)  # burn-in steps 0..20, mixing steps 21..25
    series = ess_series(trace, burn_in=10, ess_from_step=6, burnin_steps=2)
    # iterations 7..10 end at steps 14, 16, 18, 20; mixing iterations 11..15 are steps 21..25
    np.testing.assert_array_equal(series[0], [14, 16, 18, 20, 21, 22, 23, 24, 25])
    one = recorded(1, burn_in=10, mixing=5)
    np.testing.assert_array_equal(ess_series(one, 10, 10), one.mixing_series())
    np.testing.assert_array_equal(ess_series(one, 10, 0)[0], np.arange(1, 16))
    with pytest.raises(ValueError, match="ess_from_step"):
        ess_series(one, 10, 11)


# ----------------------------------------------------------------------------- end to end
def test_authors_run_records_its_protocol_in_the_config(authors_run):
    config = load(authors_run)["config"]
    assert config["protocol"] == "authors" and config["burn_in_source"] == "--burn-in"
    assert config["ess_from_step"] == BURN_IN // 2
    assert config["max_lag_requested"] == 100 and config["max_lag"] == 65  # 130 draws // 2
    assert config["burnin_steps_per_iteration"] == {"barker": 1, "lsb2": 2}
    assert config["start"] == "per_chain" and config["seeds"] == 1


def test_lsb2_takes_two_steps_per_burn_in_iteration_under_authors(authors_run):
    steps_b, _ = magnetisation_records(authors_run, "barker")
    steps_2, _ = magnetisation_records(authors_run, "lsb2")
    assert steps_b[-1] == BURN_IN + STEPS
    assert steps_2[-1] == 2 * BURN_IN + STEPS  # the mixing phase is one step per iteration
    with open(authors_run / "traces.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r[0] == "lsb2" and r[3] == "burnin"]
    assert max(int(r[CSV_COLUMNS.index("step")]) for r in rows) == 2 * BURN_IN
    # every learning step costs the same: burn-in spent twice the evaluations of B steps
    evals = {int(r[CSV_COLUMNS.index("step")]): int(r[CSV_COLUMNS.index("target_evals")])
             for r in rows}  # fmt: skip
    assert evals[2 * BURN_IN] - evals[0] == 2 * (evals[BURN_IN] - evals[0]) > 0
    neighbourhood = 5  # a mixing step re-evaluates the flipped site and its 4 neighbours
    total = load(authors_run)["samplers"]["lsb2"]["target_evals"]
    assert total == evals[2 * BURN_IN] + STEPS * neighbourhood


@pytest.mark.parametrize("name", ["barker", "lsb2"])
def test_the_ess_is_that_of_the_recorded_series_from_half_way_through_burn_in(authors_run, name):
    steps, m = magnetisation_records(authors_run, name)
    per_iteration = 2 if name == "lsb2" else 1
    last_burn = per_iteration * BURN_IN
    iteration = np.where(steps <= last_burn, steps / per_iteration, steps - last_burn + BURN_IN)
    keep = (iteration == np.floor(iteration)) & (iteration > BURN_IN // 2)
    series = m[keep].T  # [B, T]: iterations 11..140
    assert series.shape == (CHAINS, BURN_IN // 2 + STEPS)
    lag = effective_max_lag(series.shape[1], 100)
    expected = summarise_mixing(series, max_lag=lag)
    entry = load(authors_run)["samplers"][name]
    assert entry["ess_paper_mean"] == pytest.approx(expected.ess_paper_mean, rel=1e-9)
    assert entry["ess_paper_std"] == pytest.approx(expected.ess_paper_std, rel=1e-9)
    own = ess_bulk_per_chain(series)  # each chain's own bulk ESS on the same window
    own = own[np.isfinite(own)]
    assert entry["ess_bulk_chain_mean"] == pytest.approx(own.mean(), rel=1e-9)
    assert entry["ess_bulk_chain_std"] == pytest.approx(own.std(), rel=1e-9)
    mixing_only = summarise_mixing(m[steps > last_burn].T, max_lag=lag)
    assert entry["ess_paper_mean"] != pytest.approx(mixing_only.ess_paper_mean)


def test_lsb2_can_take_one_step_per_burn_in_iteration_under_authors(tmp_path):
    out = tmp_path / "single"
    assert (
        main([*AUTHORS, "--samplers", "lsb2", "--lsb2-burnin-steps", "1", "--out", str(out)]) == 0
    )
    assert load(out)["config"]["burnin_steps_per_iteration"] == {"lsb2": 1}
    steps, _ = magnetisation_records(out, "lsb2")
    assert steps[-1] == BURN_IN + STEPS


# ----------------------------------------------------------------------------- starts
def test_per_chain_starts_differ_across_chains_and_repeat_with_the_seed():
    a = paper_case(4, n=8, n_chains=5, seed=3, start="per_chain").x0
    b = paper_case(4, n=8, n_chains=5, seed=3, start="per_chain").x0
    shared = paper_case(4, n=8, n_chains=5, seed=3).x0
    torch.testing.assert_close(a, b)
    assert all(not torch.equal(a[0], a[i]) for i in range(1, 5))
    assert all(torch.equal(shared[0], shared[i]) for i in range(1, 5))
    assert not torch.equal(a, paper_case(4, n=8, n_chains=5, seed=4, start="per_chain").x0)
    with pytest.raises(ValueError, match="start must be one of"):
        paper_case(4, n=8, n_chains=5, start="each")


def test_the_command_starts_chains_apart_by_default_and_together_when_asked(tmp_path):
    base = ["--case", "1", "--size", "8", "--chains", str(CHAINS), "--burn-in", "0"]
    base += ["--steps", "4", "--samplers", "min", "--csv-thin", "1", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "apart")]) == 0
    assert main([*base, "--start", "shared", "--out", str(tmp_path / "shared")]) == 0
    _, apart = magnetisation_records(tmp_path / "apart", "min")
    _, shared = magnetisation_records(tmp_path / "shared", "min")
    assert len(set(apart[0])) > 1 and len(set(shared[0])) == 1  # the step-0 record
    assert load(tmp_path / "shared")["config"]["start"] == "shared"


# ----------------------------------------------------------------------------- seeds
def test_seeds_aggregate_what_separate_single_seed_runs_give(tmp_path):
    base = [*AUTHORS, "--samplers", "barker,min", "--seed", "5"]
    assert main([*base, "--seeds", "2", "--out", str(tmp_path / "both")]) == 0
    assert main([*base, "--out", str(tmp_path / "s5")]) == 0
    base[base.index("--seed") + 1] = "6"
    assert main([*base, "--out", str(tmp_path / "s6")]) == 0
    both, one, two = load(tmp_path / "both"), load(tmp_path / "s5"), load(tmp_path / "s6")
    assert both["config"]["seeds_run"] == [5, 6] and both["config"]["seeds"] == 2
    for name in ("barker", "min"):
        a, b, agg = one["samplers"][name], two["samplers"][name], both["samplers"][name]
        means = [a["ess_paper_mean"], b["ess_paper_mean"]]
        assert agg["ess_paper_by_seed"] == pytest.approx(means, rel=1e-12)
        assert agg["ess_paper_mean"] == pytest.approx(np.mean(means), rel=1e-12)
        assert agg["ess_paper_seed_std"] == pytest.approx(np.std(means, ddof=1), rel=1e-12)
        # equal chains per seed: pooled variance = mean within-seed variance + spread of means
        pooled = np.mean([a["ess_paper_std"] ** 2, b["ess_paper_std"] ** 2]) + np.var(means)
        assert agg["ess_paper_std"] == pytest.approx(np.sqrt(pooled), rel=1e-9)
        assert agg["accept_rate"] == pytest.approx((a["accept_rate"] + b["accept_rate"]) / 2)
        # every chain has its own alpha: nothing pooled, each chain's own bulk ESS instead
        assert a["rhat"] is None and a["ess_bulk"] is None and agg["rhat"] is None
        bulk = [a["ess_bulk_chain_mean"], b["ess_bulk_chain_mean"]]
        assert agg["ess_bulk_chain_mean"] == pytest.approx(np.mean(bulk), rel=1e-12)
    assert both["config"]["chains_share_posterior"] is False
    # the report says which protocol and seeds, and shows the spread over seeds
    page = (tmp_path / "both" / "report.html").read_text(encoding="utf-8")
    assert "Protocol authors: burn-in" in page and "2 seeds (5-6" in page
    assert "seed std of the mean" in page and "bulk ESS per chain" in page
    by_seed = both["samplers"]["min"]["ess_paper_by_seed"]
    assert f"{by_seed[0]:.3g}, {by_seed[1]:.3g}" in page
    single = (tmp_path / "s5" / "report.html").read_text(encoding="utf-8")
    assert "Protocol authors" in single and "seed std" not in single
    # the traces come from the first seed
    _, m_both = magnetisation_records(tmp_path / "both", "min")
    _, m_first = magnetisation_records(tmp_path / "s5", "min")
    np.testing.assert_array_equal(m_both, m_first)


# ----------------------------------------------------------------------------- bad values
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "1", "--seeds", "0"], "between 1 and 20"),
        (["--case", "1", "--seeds", "21"], "between 1 and 20"),
        (["--case", "1", "--seeds", "two"], "expected an integer"),
        (["--case", "1", "--protocol", "paper"], "invalid choice"),
        (["--case", "1", "--start", "each"], "invalid choice"),
        (["--image", "x.png", "--lam", "1", "--mu", "1", "--sigma", "1", "--protocol", "authors"],
         "use it with --case"),
        (["--image", "x.png", "--lam", "1", "--mu", "1", "--sigma", "1", "--start", "shared"],
         "--start applies to --case"),
        (["--image", "x.png", "--lam", "1", "--mu", "1", "--sigma", "1",
          "--lsb2-burnin-steps", "2"], "--lsb2-burnin-steps applies to --case"),
        (["--case", "4", "--lsb2-burnin-steps", "3"], "invalid choice"),
    ],
)  # fmt: skip
def test_bad_protocol_start_and_seeds_exit_2(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
