"""lsbcore.diagnostics.trace: state statistics, MarginalEstimate, Trace recording and export."""

import csv
import io
import math

import numpy as np
import pytest
import torch

from lsbcore.diagnostics.mixing import summarise_mixing
from lsbcore.diagnostics.trace import (
    CSV_COLUMNS,
    PHASES,
    MarginalEstimate,
    Trace,
    accuracy,
    magnetisation,
    write_traces_csv,
)

# Two hand-made 2x2 states (chains) and a ground truth.
X = torch.tensor(
    [
        [[1.0, 1.0], [1.0, -1.0]],
        [[-1.0, -1.0], [-1.0, -1.0]],
    ]
)
TRUTH = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])


# --------------------------------------------------------------------------- statistics
def test_magnetisation_hand_made():
    m = magnetisation(X)
    assert m.dtype == torch.float64
    assert m.tolist() == [2.0, -4.0]  # 1+1+1-1, -4
    assert magnetisation(X.to(torch.int8)).tolist() == [2.0, -4.0]


def test_accuracy_hand_made_shared_and_per_chain_truth():
    # chain 0: sites (0,0), (0,1), (1,1) agree -> 3/4; chain 1: (1,0), (1,1) -> 1/2.
    assert accuracy(X, TRUTH).tolist() == [0.75, 0.5]
    per_chain_truth = torch.stack([TRUTH, -TRUTH])  # chain 1 vs -truth: (0,0), (0,1) -> 1/2
    assert accuracy(X, per_chain_truth).tolist() == [0.75, 0.5]
    assert accuracy(X, torch.stack([X[1], X[1]])).tolist() == [0.25, 1.0]


def test_statistics_validation():
    with pytest.raises(ValueError, match=r"\[B, H, W\]"):
        magnetisation(torch.ones(4, 4))
    with pytest.raises(TypeError, match="torch.Tensor"):
        magnetisation(np.ones((1, 2, 2)))
    with pytest.raises(ValueError, match="only -1 and \\+1"):
        accuracy(X, torch.zeros(2, 2))
    with pytest.raises(ValueError, match="truth must have shape"):
        accuracy(X, torch.ones(3, 3))
    with pytest.raises(ValueError, match="truth must have shape"):
        accuracy(X, torch.ones(3, 2, 2))


# --------------------------------------------------------------------------- marginals
def test_marginal_estimate_hand_made():
    est = MarginalEstimate()
    with pytest.raises(RuntimeError, match="update"):
        est.mean()
    est.update(X)
    est.update(-X)
    est.update(X)
    # (x+1)/2 over 3 updates: chain 0 site (0,0): 1, 0, 1 -> 2/3; site (1,1): 0, 1, 0 -> 1/3.
    # chain 1 every site: 0, 1, 0 -> 1/3.
    per = est.per_chain()
    assert per.shape == (2, 2, 2)
    np.testing.assert_allclose(per[0], [[2 / 3, 2 / 3], [2 / 3, 1 / 3]])
    np.testing.assert_allclose(per[1], np.full((2, 2), 1 / 3))
    mean = est.mean()  # pooled over both chains
    np.testing.assert_allclose(mean, [[0.5, 0.5], [0.5, 1 / 3]])
    np.testing.assert_allclose(est.std(), np.sqrt(mean * (1 - mean)))
    np.testing.assert_allclose(est.std()[0, 0], 0.5)
    h13 = -(1 / 3 * math.log2(1 / 3) + 2 / 3 * math.log2(2 / 3))  # 0.9183 bits
    np.testing.assert_allclose(est.entropy(), [[1.0, 1.0], [1.0, h13]])
    assert est.count == 3 and est.shape == (2, 2, 2)


def test_marginal_estimate_certain_sites_and_reset():
    est = MarginalEstimate()
    x = torch.tensor([[[1.0, -1.0]], [[1.0, -1.0]]])  # p = 1 and p = 0: no log(0) warnings
    est.update(x)
    np.testing.assert_array_equal(est.mean(), [[1.0, 0.0]])
    np.testing.assert_array_equal(est.std(), [[0.0, 0.0]])
    np.testing.assert_array_equal(est.entropy(), [[0.0, 0.0]])
    with pytest.raises(ValueError, match="reset"):
        est.update(torch.ones(2, 3, 3))
    est.reset()
    assert est.count == 0 and est.shape is None
    est.update(torch.ones(1, 3, 3))
    np.testing.assert_array_equal(est.mean(), np.ones((3, 3)))


# --------------------------------------------------------------------------- Trace recording
def _record(trace, step, x=X, phase="burnin", force=False, log_p=None):
    if log_p is None:
        log_p = torch.full((x.shape[0],), -float(step))
    return trace.record(
        step,
        x,
        log_p,
        target_evals=10 * step,
        accept_rate=0.5,
        wall_s=0.01 * step,
        phase=phase,
        force=force,
    )


def test_thinning_stores_multiples_of_thin_and_forced_steps():
    trace = Trace(n_chains=2, thin=3)
    stored = [_record(trace, s) for s in range(11)]
    assert stored == [s % 3 == 0 for s in range(11)]
    assert _record(trace, 10, force=True)  # final step forced in
    assert not _record(trace, 10, force=True)  # repeat of the last stored step: ignored
    assert trace.arrays()["step"].tolist() == [0, 3, 6, 9, 10]
    assert len(trace) == 5
    with pytest.raises(ValueError, match="must not decrease"):
        _record(trace, 9, force=True)


def test_arrays_content_across_chunks_and_without_truth():
    trace = Trace(n_chains=2, chunk_size=4)  # 10 records -> 3 chunks
    for s in range(10):
        x = X if s % 2 == 0 else -X
        _record(trace, s, x=x, phase="burnin" if s < 6 else "mixing")
    a = trace.arrays()
    assert set(a) == {
        "step",
        "target_evals",
        "accept_rate",
        "wall_s",
        "phase",
        "magnetisation",
        "log_p",
    }
    assert a["step"].tolist() == list(range(10))
    assert a["target_evals"].tolist() == [10 * s for s in range(10)]
    np.testing.assert_allclose(a["wall_s"], 0.01 * np.arange(10))
    assert a["phase"].tolist() == [0] * 6 + [1] * 4
    assert PHASES[1] == "mixing"
    assert a["magnetisation"].shape == (10, 2) and a["magnetisation"].dtype == np.float32
    np.testing.assert_array_equal(a["magnetisation"][:, 0], [2, -2] * 5)
    np.testing.assert_array_equal(a["magnetisation"][:, 1], [-4, 4] * 5)
    np.testing.assert_array_equal(a["log_p"][:, 1], -np.arange(10))
    # arrays() returns copies
    a["step"][0] = 99
    assert trace.arrays()["step"][0] == 0


def test_accuracy_recorded_with_truth_and_mixing_series():
    trace = Trace(n_chains=2, truth=TRUTH)
    _record(trace, 0, x=X)
    _record(trace, 1, x=-X, phase="mixing")
    _record(trace, 2, x=X, phase="mixing")
    a = trace.arrays()
    np.testing.assert_allclose(a["accuracy"], [[0.75, 0.5], [0.25, 0.5], [0.75, 0.5]])
    series = trace.mixing_series()
    assert series.shape == (2, 2) and series.dtype == np.float64
    np.testing.assert_array_equal(series, [[-2, 2], [4, -4]])
    np.testing.assert_array_equal(trace.mixing_series("log_p"), [[-1, -2], [-1, -2]])
    with pytest.raises(ValueError, match="field must be one of"):
        trace.mixing_series("wall_s")
    with pytest.raises(ValueError, match="cannot go back"):
        _record(trace, 3, phase="burnin")


def test_mixing_summary_uses_the_mixing_magnetisation():
    rng = np.random.default_rng(0)
    trace = Trace(n_chains=3)
    for s in range(700):
        x = torch.from_numpy(rng.choice([-1.0, 1.0], size=(3, 4, 4)))
        _record(trace, s, x=x, phase="burnin" if s < 100 else "mixing")
    series = trace.mixing_series()
    assert series.shape == (3, 600)
    assert trace.mixing_summary() == summarise_mixing(series)
    assert trace.mixing_summary().n_draws == 600


def test_record_validation():
    trace = Trace(n_chains=2, truth=TRUTH)
    with pytest.raises(ValueError, match="3 chains"):
        _record(trace, 0, x=torch.ones(3, 2, 2))
    with pytest.raises(ValueError, match=r"log_p must be a tensor of shape \[2\]"):
        _record(trace, 0, log_p=torch.zeros(3))
    with pytest.raises(ValueError, match="phase must be one of"):
        _record(trace, 0, phase="warmup")
    with pytest.raises(ValueError, match="image shape"):
        _record(trace, 0, x=torch.ones(2, 3, 3))
    assert len(trace) == 0  # nothing half-stored by the failures
    for kwargs in ({"n_chains": 0}, {"n_chains": 2, "thin": 0}, {"n_chains": 2.5}):
        with pytest.raises(ValueError, match="positive int"):
            Trace(**kwargs)
    with pytest.raises(ValueError, match="only -1 and \\+1"):
        Trace(2, truth=torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"truth must have shape \[H, W\]"):
        Trace(2, truth=torch.ones(2, 2, 2))


# --------------------------------------------------------------------------- memory
def test_memory_bound_for_largest_configuration():
    # 30 000 steps x 30 chains at thin = 1, with truth: per record 3 * 4 * 30 = 360 bytes of
    # float32 chain values + 33 bytes of scalars (4 x 8-byte + int8 phase) = 393 bytes,
    # 11.79 MB per sampler, 70.7 MB for 6 samplers. Allocation is in whole chunks of 1024
    # records: ceil(30000 / 1024) * 1024 = 30 720 records -> 12.07 MB.
    n_steps, n_chains = 30_000, 30
    trace = Trace(n_chains=n_chains, truth=torch.ones(4, 4))
    x = torch.ones(n_chains, 4, 4)
    log_p = torch.zeros(n_chains)
    for s in range(n_steps):
        trace.record(s, x, log_p, s, 0.5, 0.0, "mixing")
    assert len(trace) == n_steps
    assert trace.nbytes == Trace.estimate_nbytes(n_steps, n_chains, with_truth=True)
    assert trace.nbytes == 30_720 * 393
    data_bytes = sum(v.nbytes for v in trace.arrays().values())
    assert data_bytes == n_steps * 393
    assert trace.nbytes - data_bytes < 1024 * 393  # slack below one chunk
    assert 6 * trace.nbytes < 75e6  # six samplers: well under 100 MB


# --------------------------------------------------------------------------- CSV
def test_csv_long_format_round_trip():
    with_truth = Trace(n_chains=2, thin=2, truth=TRUTH)
    for s in range(5):
        _record(with_truth, s, phase="burnin" if s < 2 else "mixing")
    no_truth = Trace(n_chains=3)
    x3 = torch.ones(3, 2, 2)
    for s in range(2):
        _record(no_truth, s, x=x3, phase="mixing")
    odd_name = 'lsb "2", 100% learned'  # needs CSV quoting and %-escaping
    f = io.StringIO()
    n_rows = write_traces_csv(f, {"barker": with_truth, odd_name: no_truth})
    assert n_rows == 3 * 2 + 2 * 3

    f.seek(0)
    reader = csv.DictReader(f)
    assert tuple(reader.fieldnames) == CSV_COLUMNS
    rows = list(reader)
    assert len(rows) == n_rows
    first = rows[:6]
    assert [r["sampler"] for r in first] == ["barker"] * 6
    assert [int(r["step"]) for r in first] == [0, 0, 2, 2, 4, 4]
    assert [int(r["chain"]) for r in first] == [0, 1] * 3
    assert [r["phase"] for r in first] == ["burnin"] * 2 + ["mixing"] * 4
    assert [float(r["magnetisation"]) for r in first[:2]] == [2.0, -4.0]
    assert [float(r["accuracy"]) for r in first[:2]] == [0.75, 0.5]
    assert float(first[2]["log_p"]) == -2.0
    assert int(first[4]["target_evals"]) == 40
    assert float(first[4]["wall_s"]) == pytest.approx(0.04)
    assert float(first[0]["accept_rate"]) == 0.5
    rest = rows[6:]
    assert {r["sampler"] for r in rest} == {odd_name}
    assert all(r["accuracy"] == "" for r in rest)
    assert [float(r["magnetisation"]) for r in rest] == [4.0] * 6

    # a single trace with its own header
    g = io.StringIO()
    assert no_truth.write_csv(g, "x") == 6
    assert g.getvalue().splitlines()[0] == ",".join(CSV_COLUMNS)
    assert len(g.getvalue().splitlines()) == 7
    assert Trace(n_chains=2).write_csv(io.StringIO(), "empty") == 0
