"""The benchmark of targets beyond pairwise, and the tool that times the public GWG code.

The harness is tested on stand-ins (a small PairwiseMRF, a small target that is not pairwise)
and through the real command with few steps; the timing rule on a fake clock. The public code
itself is not needed: the tool's import machinery runs on a fake checkout.
"""

from __future__ import annotations

import json
import math
import sys

import pytest
import torch

from lsbcore import PairwiseMRF, timing
from lsbcore.samplers.registry import refusal
from lsbcore.studies.benchmarks import samplers as bench
from lsbcore.studies.benchmarks import targets as bench_targets
from lsbcore.studies.benchmarks.targets import Run, Workload, measure, steps_per_second
from lsbcore.targets.base import Target
from lsbcore.targets.rbm import RBM
from tools import gwg_reference


class IndependentBits(Target):
    """``log p~(x) = h . x``: a target that is not pairwise (it provides nothing)."""

    def __init__(self, n: int):
        self.n_sites, self.shape = n, (n,)
        self.h = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)

    def log_prob(self, x):
        return self._flat(x) @ self.h


def small_mrf() -> PairwiseMRF:
    g = torch.Generator().manual_seed(0)
    J = torch.randn(6, 6, generator=g, dtype=torch.float64).triu(1) * 0.3
    return PairwiseMRF(torch.randn(6, generator=g, dtype=torch.float64), J + J.T)


@pytest.fixture
def threads():
    """The commands set torch's thread count; give it back."""
    kept = torch.get_num_threads()
    yield
    torch.set_num_threads(kept)


class FakeClock:
    """``perf_counter`` that moves only when a fake step says how long it took."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_steps_per_second_is_steps_over_the_best_timed_run_after_a_warm_up(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    durations = iter([9.0, 0.5, 0.2, 0.4])  # the warm-up's 9 s must not count

    class Sampler:
        calls = []

        def step(self, n):
            self.calls.append(n)
            clock.now += next(durations)

    sampler = Sampler()
    assert steps_per_second(sampler, 100, 3) == pytest.approx(100 / 0.2)
    assert sampler.calls == [10, 100, 100, 100]


def test_a_stand_in_workload_gives_a_figure_per_sampler_and_a_sentence_for_an_unknown_one():
    workload = Workload(
        "stand-in", small_mrf, 4, (Run("barker"), Run("gibbs"), Run("no-such-sampler"))
    )
    rows = measure(workload, torch.device("cpu"), steps=20, repeats=2)
    assert list(rows) == ["barker", "gibbs", "no-such-sampler"]
    for label in ("barker", "gibbs"):
        assert rows[label]["steps_per_second"] > 0
        assert rows[label]["evals_per_step"] >= 1
    assert rows["no-such-sampler"]["refused"].startswith("unknown sampler 'no-such-sampler'")
    text = bench_targets.table({"stand-in": rows})
    assert "barker" in text and "unknown sampler 'no-such-sampler'" in text


def test_slow_workloads_and_samplers_take_their_share_of_the_steps(monkeypatch):
    timed = []
    monkeypatch.setattr(
        bench_targets,
        "steps_per_second",
        lambda sampler, steps, repeats, learn: timed.append((steps, learn)) or 1,
    )
    runs = (Run("barker"), Run("gibbs", steps_share=0.1), Run("sqrt", steps_share=1e-6),
            Run("lsb1", steps_share=0.2, learn=True))  # fmt: skip
    rows = measure(Workload("shares", small_mrf, 2, runs, steps_share=0.5), "cpu", 100, 1)
    # never fewer than 2; the learning run times learning steps and says they ran on torch
    assert timed == [(50, False), (5, False), (2, False), (10, True)]
    assert "lsb1 (learning)" in rows


def test_learning_rows_on_an_rbm_name_the_steps_that_ran(monkeypatch):
    """LSB 1, LSB 2, FLSB 1 and FLSB 2 learn on the compiled kernels on an RBM (LSB 2' on
    torch)."""
    monkeypatch.setattr(bench_targets, "steps_per_second", lambda *args: 1.0)
    runs = tuple(
        Run(name, learn=True) for name in ("lsb1", "flsb1", "lsb2", "flsb2", "lsb2-monotone")
    )
    rows = measure(Workload("rbm", lambda: RBM.random(8, 4), 2, runs), "cpu", 10, 1)
    backends = {label: row["backend"] for label, row in rows.items()}
    assert backends == {
        "lsb1 (learning)": "compiled",
        "flsb1 (learning)": "compiled",
        "lsb2 (learning)": "compiled",
        "flsb2 (learning)": "compiled",
        "lsb2-monotone (learning)": "torch",
    }


def test_a_sampler_refused_for_the_target_shows_the_registrys_sentence():
    target = IndependentBits(5)
    workload = Workload("not pairwise", lambda: target, 3, (Run("checkerboard"),))
    rows = measure(workload, torch.device("cpu"), steps=10, repeats=2)
    sentence = refusal("checkerboard", target)
    assert sentence is not None and rows == {"checkerboard": {"refused": sentence}}


#: What one step costs where the sampler runs (the LSB paper's Table 4; the Hamming ball's count
#: is the lead's call: 11 states scored, 20 in the paper's table).
TABLE_4 = {"gwg": 1, "block-gibbs block_size=2": 4, "hamming-ball block_size=10 radius=1": None}


def test_the_rbm_command_prints_the_issues_rows_as_figures_or_sentences(capsys, threads):
    bench_targets.main(
        ["--target", "rbm", "--steps", "10", "--repeats", "1", "--json", "--samplers",
         "gwg,block-gibbs,hamming-ball"]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["info"]["threads"] == 1 and out["info"]["device"] == "CPU"
    assert out["info"]["backend"] == "auto"
    small = out["RBM 100 x 25, random weights, 100 chains"]
    large = out["RBM 784 x 500, random weights, 100 chains"]
    assert list(small) == list(TABLE_4) and list(large) == ["gwg"]
    for label, row in [*small.items(), *large.items()]:
        if "refused" in row:
            assert row["refused"].endswith(".")
        else:
            assert row["steps_per_second"] > 0 and row["evals_per_step"] >= 1
            assert TABLE_4[label] in (None, row["evals_per_step"])
            assert row["backend"] == "compiled"  # an RBM on the CPU: the compiled steps


def test_the_factor_graph_table_names_every_sampler_of_the_workload(capsys, threads):
    bench_targets.main(["--target", "factor-graph", "--steps", "10", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("device CPU, backend auto, torch")
    (workload,) = bench_targets.WORKLOADS["factor-graph"]
    assert lines[1].startswith(workload.title)
    assert len(lines) == 2 + len(workload.runs)
    for line, run in zip(lines[2:], workload.runs, strict=True):
        assert line.startswith(f"  {run.label} ")
        # on a factor graph, Gibbs, Metropolis, the block samplers, the paper's balancing
        # functions with exact or gradient ratios, GWG and the learning steps of LSB 1/2 and
        # FLSB 1/2 have compiled steps
        compiled = run.sampler in ("gibbs", "metropolis", "block-gibbs", "hamming-ball", "gwg",
                                   "flsb1", "flsb2", *bench_targets.BALANCED)  # fmt: skip
        assert line.endswith(" compiled" if compiled else " torch")
    assert any(run.learn for run in workload.runs)


def test_the_torch_backend_times_torch_steps_only(capsys, threads):
    bench_targets.main(
        ["--target", "rbm", "--steps", "10", "--repeats", "1", "--json", "--samplers", "gwg",
         "--backend", "torch"]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["info"]["backend"] == "torch"
    rows = [row for title, rows in out.items() if title != "info" for row in rows.values()]
    assert rows and all(row["backend"] == "torch" for row in rows)


def test_the_log_mmd_summary_of_the_comparison_tool():
    curves = [[-1.0, -2.0, -3.0, -5.0], [-1.0, -2.0, -4.0, -6.0]]
    summary = gwg_reference.summarise(curves)
    assert summary["final"] == pytest.approx(-5.5)
    assert summary["final sd"] == pytest.approx(2**-0.5)  # (-5, -6): sd 0.707
    assert summary["second half"] == pytest.approx(-4.5)  # means -4 and -5
    assert summary["second half sd"] == pytest.approx(2**-0.5)
    assert math.isnan(gwg_reference.summarise(curves[:1])["final sd"])


def test_bench_sends_other_targets_to_bench_targets_and_refuses_unknown_ones(monkeypatch, threads):
    calls = []
    monkeypatch.setattr(bench.bench_targets, "report", lambda *args: calls.append(args) or 0)
    assert bench.main(["--target", "rbm", "--steps", "30", "--repeats", "2", "--json"]) == 0
    assert calls == [("rbm", torch.device("cpu"), 2, 30, True)]
    with pytest.raises(SystemExit):
        bench.main(["--target", "potts"])
    with pytest.raises(ValueError, match="target must be one of rbm, photo-blocks, factor-graph"):
        bench_targets.run("potts")


# ----------------------------------------------------------------- tools/gwg_reference.py
@pytest.fixture
def clean_imports():
    """Leave sys.modules, sys.path and sys.meta_path as they were."""
    modules, path, finders = dict(sys.modules), list(sys.path), list(sys.meta_path)
    yield
    for name in set(sys.modules) - set(modules):
        del sys.modules[name]
    sys.path[:], sys.meta_path[:] = path, finders


FAKE_CHECKOUT = {
    "rbm.py": (
        "import fake_plotting_pkg\nimport fake_plotting_pkg.pyplot as plt\n"
        "from fake_progress_pkg import tqdm\nfake_plotting_pkg.use('Agg')\n"
        "class BernoulliRBM:\n    pass\n\ndef progress():\n    return tqdm(range(3))\n"
    ),
    "samplers.py": "import utils\n",
    "block_samplers.py": "import utils\n",
    "utils.py": "import rbm\nimport samplers\n",
}


def test_the_tool_imports_the_checkout_with_stand_ins_that_refuse_use_after_loading(
    tmp_path, clean_imports
):
    for name, text in FAKE_CHECKOUT.items():
        (tmp_path / name).write_text(text)
    unused = ("fake_plotting_pkg", "fake_progress_pkg")
    code, served = gwg_reference.load_public_code(tmp_path, unused_imports=unused)
    assert sorted(code) == sorted(gwg_reference.MODULES) and served == sorted(unused)
    assert all(module.__file__.startswith(str(tmp_path)) for module in code.values())
    with pytest.raises(RuntimeError, match="fake_progress_pkg.tqdm, a stand-in"):
        code["rbm"].progress()


def test_the_tool_refuses_a_folder_that_is_not_a_checkout(tmp_path, clean_imports):
    (tmp_path / "rbm.py").write_text("")
    with pytest.raises(SystemExit, match="samplers.py, block_samplers.py, utils.py missing"):
        gwg_reference.load_public_code(tmp_path)


def test_the_tool_alternates_the_codes_and_keeps_each_ones_best_repeat(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(gwg_reference.time, "perf_counter", clock)
    order = []
    durations = {"public": iter([5.0, 2.0, 1.0]), "ours": iter([5.0, 0.1, 0.3])}

    def advance(key):
        def run(steps):
            order.append((key, steps))
            clock.now += next(durations[key])

        return run

    rates = gwg_reference.best_rates(
        {"public": (advance("public"), 100), "ours": (advance("ours"), 1000)}, repeats=2
    )
    assert order == [
        ("public", 10), ("ours", 100), ("public", 100), ("ours", 1000), ("public", 100),
        ("ours", 1000),
    ]  # fmt: skip
    assert rates == pytest.approx({"public": 100 / 1.0, "ours": 1000 / 0.1})
