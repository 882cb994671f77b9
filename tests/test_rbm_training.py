"""RBM training and likelihoods: log Z against sums over both layers, the exact, pseudo and
AIS likelihoods by hand, PCD that raises the exact log-likelihood and is seeded, save/load
round trips, every refusal, and the training command."""

from __future__ import annotations

import importlib
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lsbcore.exact.states import all_states
from lsbcore.rbm import likelihood, models
from lsbcore.rbm.data import MAX_VISIBLE, digits
from lsbcore.rbm.likelihood import (
    ais_log_partition,
    baseline_log_likelihood,
    exact_log_likelihood,
    exact_log_partition,
    pseudo_log_likelihood,
)
from lsbcore.rbm.models import MODELS, load_model, read_meta, save_model
from lsbcore.rbm.train import Training, main, progress_bar, train
from lsbcore.targets.rbm import RBM

pytestmark = pytest.mark.usefixtures("single_thread")

# the module, not the function lsbcore.rbm.train that the package exports under its name
train_module = importlib.import_module("lsbcore.rbm.train")


def joint_log_partition(rbm: RBM) -> float:
    """``log sum_{v, h} exp(b.v + c.h + h.W v)`` over every state of both layers."""
    v = 0.5 * (1.0 + all_states(rbm.n_visible))  # [2^n, n]
    h = 0.5 * (1.0 + all_states(rbm.n_hidden))  # [2^m, m]
    joint = (v @ rbm.b_visible).unsqueeze(1) + h @ rbm.b_hidden + (v @ rbm.W.T) @ h.T
    return float(torch.logsumexp(joint.reshape(-1), 0))


def small_digits() -> np.ndarray:
    """The 8 x 8 digits' central 4 x 4 pixels: 16 visible units, cheap to enumerate."""
    images, _ = digits(8)
    return images.reshape(-1, 8, 8)[:, 2:6, 2:6].reshape(-1, 16)


# ----------------------------------------------------------------------------- likelihoods
@pytest.mark.parametrize("n_visible, n_hidden", [(7, 4), (4, 7), (5, 5)])
def test_exact_log_partition_equals_the_sum_over_both_layers(n_visible, n_hidden):
    """Both branches (enumerate h when it is smaller, else v) against the joint sum."""
    rbm = RBM.random(n_visible, n_hidden, seed=3, scale=1.5)
    assert exact_log_partition(rbm) == pytest.approx(joint_log_partition(rbm), abs=1e-11)


def test_exact_log_partition_uses_every_enumeration_block(monkeypatch):
    monkeypatch.setattr(likelihood, "ENUMERATION_BLOCK", 8)  # 2^6 states in 8 blocks
    rbm = RBM.random(9, 6, seed=1, scale=1.0)
    assert exact_log_partition(rbm) == pytest.approx(joint_log_partition(rbm), abs=1e-11)


def test_exact_log_likelihood_is_a_normalised_log_probability():
    """exp(log p(v)) over every v sums to 1, and the mean over rows is the mean of log p."""
    rbm = RBM.random(6, 4, seed=2, scale=1.0)
    states = 0.5 * (1.0 + all_states(6))
    log_p = torch.tensor([exact_log_likelihood(rbm, row) for row in states])
    assert float(torch.logsumexp(log_p, 0)) == pytest.approx(0.0, abs=1e-12)
    rows = states[[3, 17, 17, 60]]
    assert exact_log_likelihood(rbm, rows) == pytest.approx(float(log_p[[3, 17, 17, 60]].mean()))
    # +-1 states mean the same rows
    assert exact_log_likelihood(rbm, 2 * rows - 1) == pytest.approx(exact_log_likelihood(rbm, rows))


def test_pseudo_log_likelihood_sums_the_exact_conditionals():
    rbm = RBM.random(5, 3, seed=4, scale=1.0)
    states = 0.5 * (1.0 + all_states(5))
    log_p = rbm.log_prob(all_states(5))  # unnormalised
    rows = states[[0, 9, 30]]
    expected = 0.0
    for row in rows:
        code = int((row * 2 ** torch.arange(5)).sum())
        for i in range(5):
            other = code ^ (1 << i)
            expected += float(log_p[code] - torch.logaddexp(log_p[code], log_p[other]))
    assert pseudo_log_likelihood(rbm, rows) == pytest.approx(expected / 3, abs=1e-12)


def test_baseline_is_the_factorised_bernoulli_likelihood_by_hand():
    rows = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]])
    p = np.clip(rows.mean(0), 1e-3, 1 - 1e-3)  # 0.75, 0.25, 0.25
    by_hand = np.mean([np.sum(r * np.log(p) + (1 - r) * np.log(1 - p)) for r in rows])
    assert baseline_log_likelihood(rows) == pytest.approx(by_hand, abs=1e-12)
    # a pixel never on: the clipped probability, not log 0
    assert baseline_log_likelihood(rows, [[1, 1, 1]]) == pytest.approx(
        math.log(0.75) + 2 * math.log(0.25)
    )


def test_ais_estimates_log_z_of_a_model_that_can_be_enumerated():
    rbm = RBM.random(12, 10, seed=5, scale=1.0)
    exact = exact_log_partition(rbm)
    estimate, error = ais_log_partition(rbm, n_runs=200, n_temperatures=1000, seed=0)
    assert 0 < error < 0.05
    assert abs(estimate - exact) < max(5 * error, 0.02)
    assert ais_log_partition(rbm, n_runs=200, n_temperatures=1000, seed=0)[0] == estimate


def test_likelihoods_refuse_what_they_cannot_compute():
    big = RBM.random(30, 25, seed=0)
    with pytest.raises(ValueError, match="at most 20 units"):
        exact_log_partition(big)
    rbm = RBM.random(4, 3, seed=0)
    for bad, words in [
        ([[0, 1, 2, 0]], "only 0 and 1"),
        ([[0, 1, 0]], "4 values"),
        ([[np.nan, 0, 1, 0]], "only 0 and 1"),
        (np.zeros((2, 2, 4)), "2-D"),
    ]:
        with pytest.raises(ValueError, match=words):
            exact_log_likelihood(rbm, bad)
    with pytest.raises(ValueError, match="needs an RBM"):
        pseudo_log_likelihood("model", [[0, 1, 0, 1]])
    with pytest.raises(ValueError, match="n_runs"):
        ais_log_partition(rbm, n_runs=1)
    with pytest.raises(ValueError, match="base must hold 4"):
        ais_log_partition(rbm, base=[0.0, 1.0])


# ----------------------------------------------------------------------------- training
def test_pcd_raises_the_exact_log_likelihood_above_the_factorised_model():
    """16 pixels of the digits and 8 hidden units: exact log-likelihood at every epoch."""
    data = small_digits()
    result = train(data, 8, epochs=30, batch_size=50, lr=0.1, seed=0)
    exact = [record["log_likelihood"] for record in result.history]
    assert [record["epoch"] for record in result.history] == list(range(1, 31))
    assert None not in exact and result.stopped is None
    assert exact[-1] > exact[0] + 1.0  # nats per image (about -10.9 at the start)
    final = exact_log_likelihood(result.model, data)
    assert final > baseline_log_likelihood(data) + 1.0
    # the untrained start is the factorised model (W ~ 0.01): its likelihood is the baseline's
    start = train(data, 8, epochs=1, lr=1e-9, seed=0).model
    assert exact_log_likelihood(start, data) == pytest.approx(
        baseline_log_likelihood(data), abs=0.02
    )


def test_training_is_seeded():
    data = small_digits()[:300]
    first = train(data, 6, epochs=3, seed=7, shape=(4, 4))
    again = train(data, 6, epochs=3, seed=7, shape=(4, 4))
    other = train(data, 6, epochs=3, seed=8, shape=(4, 4))
    assert torch.equal(first.model.W, again.model.W)
    assert torch.equal(first.model.b_visible, again.model.b_visible)
    assert torch.equal(first.model.b_hidden, again.model.b_hidden)
    assert not torch.equal(first.model.W, other.model.W)
    assert first.model.shape == (4, 4)


def test_progress_reports_every_update_and_can_stop_training():
    data = small_digits()[:200]  # 4 updates per epoch at batch 50
    seen = []
    result = train(data, 4, epochs=3, batch_size=50, progress=lambda f, m: seen.append((f, m)))
    assert [f for f, _ in seen] == pytest.approx([i / 12 for i in range(1, 13)])
    assert seen[-1][1] == "epoch 3/3" and result.stopped is None

    stopped = train(data, 4, epochs=3, batch_size=50, progress=lambda f, m: f < 0.5)
    assert stopped.stopped == "stopped by the user after 6 of 12 updates"
    assert [record["epoch"] for record in stopped.history] == [1]  # epoch 2 was not finished
    assert isinstance(stopped, Training) and isinstance(stopped.model, RBM)


def test_training_stops_at_its_time_limit():
    result = train(small_digits(), 4, epochs=10_000, max_seconds=1e-9)
    assert result.stopped.startswith("stopped at the time limit of 1e-09 s after 1 of ")
    assert result.history == []


def test_training_refuses_bad_arguments_in_a_sentence():
    data = small_digits()[:100]
    cases = [
        (dict(data=[[0, 2]], n_hidden=3), "only 0 and 1"),
        (dict(data=[[0.0, np.nan]], n_hidden=3), "only 0 and 1"),
        (dict(data=np.zeros((2, MAX_VISIBLE + 1)), n_hidden=3), "visible units"),
        (dict(n_hidden=0), "n_hidden"),
        (dict(n_hidden=True), "n_hidden"),
        (dict(n_hidden=4, epochs=0), "epochs"),
        (dict(n_hidden=4, lr=0.0), "lr must be a positive"),
        (dict(n_hidden=4, lr=-1.0), "lr"),
        (dict(n_hidden=4, k=0), "k must"),
        (dict(n_hidden=4, batch_size=0), "batch_size"),
        (dict(n_hidden=4, max_seconds=1e9), "max_seconds"),
        (dict(n_hidden=4, progress="yes"), "progress must be a function"),
        (dict(n_hidden=4, shape=(3, 5)), "visible units"),
    ]
    for arguments, words in cases:
        arguments.setdefault("data", data)
        with pytest.raises(ValueError, match=words):
            train(**arguments)


def test_diverging_training_is_refused(monkeypatch):
    monkeypatch.setattr(train_module, "MOMENTUM", 50.0)  # every update multiplies the step
    with pytest.raises(ValueError, match="diverged .* smaller lr"):
        train(small_digits()[:100], 4, epochs=50, lr=10.0)


# ----------------------------------------------------------------------------- files
def test_save_and_load_round_trip_exactly(tmp_path):
    rbm = RBM.random(6, 4, seed=9, scale=2.0)
    rbm = RBM(rbm.W, rbm.b_visible, rbm.b_hidden, shape=(2, 3))
    path = tmp_path / "model.npz"
    save_model(rbm, path, note="test", epochs=3)
    for source in (path, str(path), path.read_bytes()):
        again = load_model(source)
        assert torch.equal(again.W, rbm.W) and again.shape == (2, 3)
        assert torch.equal(again.b_visible, rbm.b_visible)
        assert torch.equal(again.b_hidden, rbm.b_hidden)
    assert read_meta(path) == {"note": "test", "epochs": 3}


def test_shipped_models_load_by_name_with_their_shapes():
    assert set(MODELS) == {"digits-8x8", "digits-16x16", "digits-28x28"}
    small, large = load_model("digits-8x8"), load_model("digits-16x16")
    assert (small.n_visible, small.n_hidden, small.shape) == (64, 50, (8, 8))
    assert (large.n_visible, large.n_hidden, large.shape) == (256, 100, (16, 16))
    paper = load_model("digits-28x28")  # the LSB paper's RBM size
    assert (paper.n_visible, paper.n_hidden, paper.shape) == (784, 250, (28, 28))
    images, _ = digits(28)
    assert pseudo_log_likelihood(paper, images) > baseline_log_likelihood(images) + 50
    # trained: far better than the factorised model on the pseudo-likelihood's own terms
    images, _ = digits(8)
    assert pseudo_log_likelihood(small, images) > baseline_log_likelihood(images) + 5
    assert read_meta("digits-16x16")["seed"] == 0


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_loading_refuses_bad_model_files_in_a_sentence(tmp_path, monkeypatch):
    good = dict(
        W=np.zeros((2, 3)),
        b_visible=np.zeros(3),
        b_hidden=np.zeros(2),
        shape=np.array([3]),
        meta=np.asarray(json.dumps({})),
    )
    assert load_model(_npz(**good)).n_visible == 3
    cases = [
        (tmp_path / "missing.npz", "does not exist"),
        (b"not a zip at all", "not a readable .npz"),
        (_npz(W=np.zeros((2, 3))), "lacks b_visible, b_hidden, shape, meta"),
        (_npz(**{**good, "W": np.full((2, 3), np.nan)}), "finite numbers only"),
        (_npz(**{**good, "b_hidden": np.zeros(5)}), "one bias per hidden unit"),
        (_npz(**{**good, "shape": np.array([2, 2])}), "does not hold a valid RBM"),
        (_npz(**{**good, "shape": np.array([1.5])}), "damaged shape record"),
        (_npz(**{**good, "meta": np.asarray("[1, 2]")}), "damaged meta record"),
        (_npz(**{**good, "W": np.array([["a", "b", "c"]] * 2)}), "not numbers"),
        (_npz(**{**good, "W": np.array([None] * 6, dtype=object).reshape(2, 3)}), "readable"),
        (12, "shipped name"),
    ]
    for source, words in cases:
        with pytest.raises(ValueError, match=words):
            load_model(source)
    monkeypatch.setattr(models, "MAX_MODEL_BYTES", 100)
    with pytest.raises(ValueError, match="larger than"):
        load_model(_npz(**good))
    with pytest.raises(ValueError, match="JSON values only"):
        save_model(RBM.random(3, 2), tmp_path / "x.npz", when=object())
    with pytest.raises(ValueError, match="needs an RBM"):
        save_model("rbm", tmp_path / "x.npz")


# ----------------------------------------------------------------------------- command
def test_the_training_command_writes_a_model_with_a_progress_bar(tmp_path, capsys):
    data = tmp_path / "rows.npy"
    np.save(data, small_digits()[:200].reshape(-1, 4, 4))
    out = tmp_path / "out.npz"
    assert main(["--data", str(data), "--hidden", "5", "--epochs", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().err
    assert "[" + "#" * 30 + "] 100.0% epoch 2/2" in printed and "wrote" in printed
    model = load_model(out)
    assert (model.n_hidden, model.shape) == (5, (4, 4))
    assert read_meta(out)["epochs"] == 2

    assert main(["--data", str(tmp_path / "none.npy"), "--out", str(out)]) == 2
    assert "error:" in capsys.readouterr().err
    bad = tmp_path / "bad.npy"
    np.save(bad, np.full((3, 4), 2))
    assert main(["--data", str(bad), "--out", str(out)]) == 2
    assert "other than 0 and 1" in capsys.readouterr().err


def test_the_command_runs_as_a_module_without_warnings(tmp_path):
    """``python -m lsbcore.rbm.train`` in a fresh process: the model file, the bar, no warning
    (runpy's note that the package imported the module first is silenced, nothing else)."""
    data = tmp_path / "rows.npy"
    np.save(data, np.eye(4, dtype=np.uint8))
    out = tmp_path / "model.npz"
    command = [sys.executable, "-W", "default", "-m", "lsbcore.rbm.train", "--data", str(data)]
    command += ["--hidden", "2", "--epochs", "1", "--persistent", "3", "--out", str(out)]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "100.0% epoch 1/1" in done.stderr
    assert read_meta(out)["n_persistent"] == 3 and load_model(out).n_hidden == 2


def test_progress_bar_draws_in_place():
    stream = io.StringIO()
    show = progress_bar("fit", width=4, stream=stream)
    show(0.5, "epoch 1/2")
    show(0.6, "epoch 1/2")  # same number of marks: not redrawn
    show(1.0, "epoch 2/2")
    text = stream.getvalue()
    assert text.count("\r") == 2 and "\rfit [##--]  50.0% epoch 1/2" in text
    assert text.endswith("\n") and "[####] 100.0% epoch 2/2" in text


def test_rows_without_a_shape_train_a_model_laid_out_on_a_square_grid():
    rows = (np.random.default_rng(0).random((40, 36)) < 0.5).astype(np.uint8)
    model = train(rows, 4, epochs=1, seed=0).model
    assert tuple(model.shape) == (6, 6)
    assert tuple(train(rows, 4, epochs=1, seed=0, shape=(3, 12)).model.shape) == (3, 12)


def test_the_command_refuses_a_model_it_could_not_write_before_training(tmp_path, capsys):
    out = tmp_path / "missing" / "model.npz"  # a folder that does not exist
    with pytest.raises(SystemExit) as exc:
        main(["--data", "digits-8x8", "--hidden", "2", "--epochs", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--out" in err and "does not exist" in err
    assert "training [" not in err and not out.exists()
