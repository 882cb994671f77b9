"""The benchmark behind the learning kernels' chain-group threshold
(``lsbcore.studies.benchmarks.learning_groups``): it times each sampler in one group and in two,
and its "picked" column is what the steps take there."""

from __future__ import annotations

from lsbcore.backends import threads
from lsbcore.studies.benchmarks import learning_groups as bench
from lsbcore.targets.rbm import RBM


def test_a_row_per_model_chains_and_sampler_with_both_rates_and_the_picked_groups(
    monkeypatch, capsys
):
    monkeypatch.setattr(bench, "MODELS", {"tiny": lambda: RBM.random(6, 3, seed=2)})
    calls = []
    timed = bench.steps_per_second
    monkeypatch.setattr(
        bench, "steps_per_second",
        lambda s, g, n: calls.append(g) or timed(s, g, n),
    )  # fmt: skip
    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "MIN_LEARNING_WORK", 10**9)  # picked: one group
    monkeypatch.setattr(bench, "LATTICE_SIDES", (3,))
    bench.main(["--chains", "1,3", "--samplers", "lsb1,flsb2", "--steps", "3", "--rounds", "2"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][2:]
    assert [row.split(" | ")[:3] for row in rows] == [
        ["| tiny", "1", "lsb1"], ["| tiny", "1", "flsb2"], ["| tiny", "3", "lsb1"],
        ["| tiny", "3", "flsb2"], ["| Ising 3 x 3", "1", "lsb2"], ["| Ising 3 x 3", "3", "lsb2"],
    ]  # fmt: skip
    assert all(row.endswith("| 1 |") for row in rows)
    assert calls == [1, 2, 1, 2] * 6  # a row's rounds alternate one group and two
