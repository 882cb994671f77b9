"""Ground truth of the RBM experiment: exact block Gibbs against enumeration, its cache, the
shipped-file lookup and the MMD noise floor against its exact expectation."""

import importlib
import math

import numpy as np
import pytest
import torch

from lsbcore.diagnostics.mmd import hamming_kernel
from lsbcore.exact.states import all_states, state_codes
from lsbcore.targets.rbm import RBM

# the module (the package re-exports its function under the same name)
gt = importlib.import_module("lsbcore.rbm.ground_truth")


def exact_law(rbm: RBM) -> np.ndarray:
    return torch.softmax(rbm.log_prob(all_states(rbm.n_visible)), 0).numpy()


def test_ground_truth_matches_enumeration_on_a_12_visible_rbm(exact):
    rbm = RBM.random(12, 6, seed=1, scale=1.5)
    p = exact_law(rbm)  # 2^12 states
    draws = 40_000  # independent chains: N_eff = N
    truth = gt.ground_truth(rbm, n_samples=draws, steps=40, seed=0)
    counts = np.bincount(state_codes(truth).numpy(), minlength=2**12)
    limit = exact.tv_threshold(p, draws)
    assert exact.tv(p, counts) < limit
    # the check has power: the same chains cut short after 5 sweeps fail it
    short = rbm.gibbs(draws, 5, seed=0)
    assert exact.tv(p, np.bincount(state_codes(short).numpy(), minlength=2**12)) > limit


def test_the_cache_returns_the_same_tensor_and_another_model_another():
    rbm = RBM.random(10, 4, seed=2)
    first = gt.ground_truth(rbm, n_samples=50, steps=20, seed=0)
    assert gt.ground_truth(rbm, n_samples=50, steps=20, seed=0) is first
    # an equal model built afresh hits the same entry: the key is the weights' hash
    twin = RBM(rbm.W.clone(), rbm.b_visible.clone(), rbm.b_hidden.clone())
    assert gt.ground_truth(twin, n_samples=50, steps=20, seed=0) is first
    other = RBM(rbm.W + 0.5, rbm.b_visible, rbm.b_hidden)
    assert gt.model_hash(other) != gt.model_hash(rbm)
    assert not torch.equal(gt.ground_truth(other, n_samples=50, steps=20, seed=0), first)
    assert not torch.equal(gt.ground_truth(rbm, n_samples=50, steps=20, seed=1), first)
    assert torch.equal(first, rbm.gibbs(50, 20, seed=0))  # it is RBM.gibbs, nothing else


def test_a_written_truth_is_read_back_and_found_among_the_shipped_files(tmp_path, monkeypatch):
    rbm = RBM.random(13, 3, seed=4)  # 13 sites: packed bits with a partial byte
    path = gt.write_truth(rbm, tmp_path / "rbm_tiny_truth.npz", n_samples=30, steps=5, seed=2)
    key, truth = gt.read_truth(path)
    assert key == (gt.model_hash(rbm), 30, 5, 2)
    assert torch.equal(truth, rbm.gibbs(30, 5, seed=2))
    # a fresh cache finds the shipped file instead of running Gibbs
    monkeypatch.setattr(gt, "ASSETS", tmp_path)
    monkeypatch.setattr(gt, "_TRUTH", {})
    monkeypatch.setattr(RBM, "gibbs", lambda *a, **k: pytest.fail("ran Gibbs"))
    assert torch.equal(gt.ground_truth(rbm, n_samples=30, steps=5, seed=2), truth)
    (tmp_path / "bad.npz").write_bytes(b"not a file")
    with pytest.raises(ValueError, match="not a ground-truth file"):
        gt.read_truth(tmp_path / "bad.npz")


def test_the_noise_floor_averages_to_its_exact_expectation():
    # Given the truth T, a draw X of n exact samples has
    # E[MMD^2] = mean k(T, T) + 1/n + (1 - 1/n) E k(x, x') - 2 mean_t E_x k(t, x),
    # every term computed by enumerating the 2^10 states
    rbm = RBM.random(10, 5, seed=5, scale=1.0)
    n, draws = 16, 400
    truth = gt.ground_truth(rbm, n_samples=200, steps=50, seed=0)
    states = all_states(10)
    p = torch.from_numpy(exact_law(rbm))
    k_states = hamming_kernel(states, states)
    expected = (
        hamming_kernel(truth, truth).mean()
        + 1 / n
        + (1 - 1 / n) * (p @ k_states @ p)
        - 2 * (hamming_kernel(truth, states) @ p).mean()
    )
    values = 10 ** np.array(gt.floor_draws(rbm, n, draws, n_samples=200, steps=50, seed=0))
    standard_error = values.std(ddof=1) / math.sqrt(draws)
    assert abs(values.mean() - float(expected)) < 4 * standard_error
    # the noise floor is the mean log10 of those draws, and cached
    floor = gt.noise_floor(rbm, n, draws, n_samples=200, steps=50, seed=0)
    assert floor == pytest.approx(np.mean(np.log10(values)), abs=1e-12)
    # a sample from the uniform law (no Gibbs at all) sits well above it
    uniform = RBM(torch.zeros(5, 10), torch.zeros(10), torch.zeros(5)).gibbs(n, 0, seed=9)
    from lsbcore.diagnostics.mmd import log_mmd

    assert log_mmd(uniform, truth) > floor + 0.3


def test_bad_arguments_are_refused_in_a_sentence():
    with pytest.raises(ValueError, match="lsbcore RBM"):
        gt.ground_truth(np.zeros((3, 3)))
    rbm = RBM.random(4, 2)
    with pytest.raises(ValueError, match="n_samples"):
        gt.ground_truth(rbm, n_samples=0)
    with pytest.raises(ValueError, match="draws"):
        gt.floor_draws(rbm, 4, draws=0, n_samples=10, steps=1)


def test_a_model_without_shipped_truth_gets_the_sweeps_its_budget_buys():
    """The user's own model: 10,000 sweeps when small, fewer when large (never below the
    minimum), and the comparison's truth and floor use that length."""
    from lsbcore.rbm.live import RBMComparison
    from lsbcore.rbm.models import load_model

    for name in ("digits-8x8", "digits-16x16", "digits-28x28"):
        assert gt.is_shipped(load_model(name)), name
    small, large = RBM.random(12, 4, seed=2), RBM.random(4096, 200, seed=2)
    assert not gt.is_shipped(small)
    assert gt.affordable_steps(small) == gt.TRUTH_STEPS
    assert gt.affordable_steps(large) == gt.MIN_TRUTH_STEPS
    middle = RBM.random(256, 100, seed=2)  # 2.56e7 multiply-adds a sweep
    assert gt.affordable_steps(middle) == gt.GIBBS_BUDGET // (2 * 500 * 256 * 100)
    comparison = RBMComparison(small, ["gwg"], 4, truth_steps=30)
    assert comparison.truth_steps == 30
    assert torch.equal(comparison.truth, gt.ground_truth(small, steps=30))
    floor = comparison.noise_floor
    assert floor == gt.noise_floor(small, 4, draws=8, steps=30, truth=comparison.truth)
