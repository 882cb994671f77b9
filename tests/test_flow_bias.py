"""The measurement of flow-latent's bias (``lsbcore.studies.flows.bias``) on tiny settings: its
table's
rows, determinism for a seed, the floor, and the command's table and JSON file."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior
from lsbcore.studies.flows.bias import BiasRow, iid_floor, main, measure_bias, self_noise

pytestmark = pytest.mark.usefixtures("single_thread")

PAIR = IsingPosterior(torch.tensor([[0.8, -0.3]], dtype=torch.float64), 0.4)
SETTINGS = dict(train_steps=20, chains=256, steps=20, thin=2, burn_ins=(0, 30), seed=3)


def test_the_bias_table_has_a_row_per_flow_and_burn_in_and_is_deterministic():
    rows = measure_bias(PAIR, **SETTINGS)
    assert [(r.flow, r.train_steps, r.burn_in) for r in rows] == [
        ("untrained", 0, 0), ("untrained", 0, 30), ("half-trained", 10, 0),
        ("half-trained", 10, 30), ("trained", 20, 0), ("trained", 20, 30),
    ]  # fmt: skip
    assert all(r.draws == 256 * 10 for r in rows)
    for r in rows:
        assert 0 <= r.tv_latent <= 1 and 0 <= r.tv_exact <= 1 and 0 < r.tv_floor < 0.05
        assert 0 <= r.accept_latent <= 1 and 0 <= r.accept_exact <= 1
        assert 0 <= r.noise_latent < 0.2 and 0 <= r.noise_exact < 0.2
    # flow-exact after a burn-in on 4 states: within noise of the exact law (floor ~0.01)
    for r in rows:
        if r.burn_in:
            assert r.tv_exact < 5 * r.tv_floor, r
    assert np.isnan(rows[0].elbo) and np.isfinite(rows[-1].elbo)
    assert measure_bias(PAIR, **SETTINGS) == rows  # the same seed, the same table


def test_the_floor_is_the_tv_of_independent_exact_draws():
    p = np.array([0.5, 0.25, 0.125, 0.125])
    floor = iid_floor(p, 10_000, seed=0, replicates=50)
    # E[TV] ~ 0.4 sqrt(K_eff / N) for large N, K_eff = (sum sqrt p)^2
    assert floor == pytest.approx(0.4 * np.sqrt(np.sqrt(p).sum() ** 2 / 10_000), rel=0.15)


def test_the_bias_command_prints_its_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "bias.json"
    argv = ["--seed", "1", "--train-steps", "2", "--chains", "8", "--steps", "2", "--thin", "1",
            "--burn-in", "0", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[:3] == ["flow", "train", "ELBO"] and len(printed) == 5
    saved = json.loads(out.read_text())
    assert [BiasRow(**row).flow for row in saved["rows"]] == ["untrained", "half-trained",
                                                              "trained"]  # fmt: skip
    assert saved["args"]["seed"] == 1
    assert main(["--chains", "1"]) == 2  # refused in a sentence (two halves are compared)


def test_the_self_noise_is_half_the_tv_between_the_halves():
    halves = np.array([[30.0, 10.0, 0.0, 0.0], [20.0, 20.0, 0.0, 0.0]])
    assert self_noise(halves) == pytest.approx(0.125)  # TV(0.75/0.25, 0.5/0.5) = 0.25
