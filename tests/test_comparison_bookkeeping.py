"""Comparison's bookkeeping: what it records equals the samplers' own numbers step by step, and
LSB 2's kernel form (its pieces) is rebuilt when the network changes, not on every call."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lsbcore import Comparison, IsingPosterior, make_sampler
from lsbcore.balancing.functions import NetworkBalancing

pytestmark = pytest.mark.usefixtures("single_thread")

SAMPLERS = ("sqrt", "lsb1", "lsb2")
CALLS = (1, 2, 5, 1, 13, 3, 1, 40)  # uneven calls, as the live page's chunk sizing makes them


def small_target(shape=(5, 4)):
    generator = torch.Generator().manual_seed(2)
    alpha = torch.randn(*shape, generator=generator, dtype=torch.float64)
    return IsingPosterior(alpha, 0.6, "free")


def reference(name, target, truth, burn_in, mixing, thin, chains, seed, resync_every):
    """One sampler alone, one step per call: its statistics after each kept step (the record)
    and the sum of its kept mixing states (the marginal)."""
    sampler = make_sampler(
        name, target, chains, seed=seed, backend="compiled", resync_every=resync_every
    )
    sampler.track_statistics(truth)
    sites = target.n_sites
    rows, total, kept = [], torch.zeros(chains, *target.shape, dtype=torch.float64), 0
    for step in range(1, burn_in + mixing + 1):
        sampler.step(1, learn=step <= burn_in and sampler.learnable)
        if step % thin:
            continue
        stats = sampler.statistics.clone()
        rows.append(
            (
                step,
                stats[:, 1].numpy(),
                stats[:, 0].numpy(),
                ((sites + stats[:, 2]) * 0.5 / sites).numpy(),
                sampler.n_target_evals,
                sampler.n_accepted / (step * chains),
            )
        )
        if step > burn_in:
            total += (sampler.x + 1.0) * 0.5
            kept += 1
    return rows, total / kept


@pytest.mark.parametrize("thin", [1, 3])
def test_records_and_marginals_equal_the_samplers_own_numbers_step_by_step(thin):
    """Traces and marginals from uneven calls (learning in burn-in, resyncs inside calls) equal
    exactly what each sampler run alone reports after every kept step."""
    target = small_target()
    truth = torch.where(target.alpha[0] > 0, 1.0, -1.0).double()
    chains, seed, resync_every = 3, 5, 7
    c = Comparison(
        SAMPLERS, target, chains, seed=seed, thin=thin, truth=truth, backend="compiled",
        resync_every=resync_every,
    )  # fmt: skip
    burn_in = sum(CALLS)
    for n in CALLS:
        c.step(n, learn=True)
    c.start_mixing()
    for n in CALLS:
        c.step(n)
    for name in SAMPLERS:
        rows, marginal = reference(
            name, target, truth, burn_in, burn_in, thin, chains, seed, resync_every
        )
        arrays = c.traces[name].arrays()
        assert list(arrays["step"][1:]) == [row[0] for row in rows]
        for field, column in (("magnetisation", 1), ("log_p", 2), ("accuracy", 3)):
            expected = np.stack([row[column] for row in rows]).astype(np.float32)
            np.testing.assert_array_equal(arrays[field][1:], expected, err_msg=f"{name} {field}")
        assert list(arrays["target_evals"][1:]) == [row[4] for row in rows]
        np.testing.assert_allclose(
            arrays["accept_rate"][1:], [row[5] for row in rows], rtol=1e-12, atol=0
        )
        assert c.marginals[name].count == sum(row[0] > burn_in for row in rows)
        np.testing.assert_array_equal(c.marginals[name].per_chain(), marginal.numpy())


def counting_pieces(monkeypatch) -> list[int]:
    calls = []
    pieces = NetworkBalancing.pieces

    def counted(self):
        calls.append(1)
        return pieces(self)

    monkeypatch.setattr(NetworkBalancing, "pieces", counted)
    return calls


def test_lsb2_pieces_are_built_once_per_network_not_per_call(monkeypatch):
    """Frozen calls reuse LSB 2's kernel form; a learning step, an in-place edit of a weight
    and a restore through ``.data`` each rebuild it, and the rebuilt form is the new
    network's."""
    sampler = make_sampler("lsb2", small_target(), 3, seed=1, backend="compiled")
    calls = counting_pieces(monkeypatch)
    for _ in range(6):
        sampler.step(1)
    assert len(calls) <= 1  # built with the sampler (or at its first step), then reused

    def rebuilt(action) -> int:
        before = len(calls)
        action()
        sampler.step(1)
        sampler.step(3)
        return len(calls) - before

    assert rebuilt(lambda: None) == 0
    assert rebuilt(lambda: sampler.step(2, learn=True)) == 1
    _, slope, intercept = sampler.balancing.pieces()
    assert torch.equal(torch.from_numpy(sampler._kernel_function().slope), slope.detach())
    assert torch.equal(torch.from_numpy(sampler._kernel_function().intercept), intercept.detach())

    def edit():
        with torch.no_grad():
            sampler.balancing.layer2.bias.add_(0.25)

    assert rebuilt(edit) == 1
    vector = torch.nn.utils.parameters_to_vector(sampler._learned_params()).detach().clone()
    assert rebuilt(lambda: sampler._write_learned_params(vector * 0.5)) == 1
    _, slope, _ = sampler.balancing.pieces()
    assert torch.equal(torch.from_numpy(sampler._kernel_function().slope), slope.detach())


def test_a_comparison_in_mixing_builds_lsb2_pieces_once(monkeypatch):
    """The live page calls ``Comparison.step`` many times a second: LSB 2's pieces are built
    once after burn-in, not per call."""
    c = Comparison(["lsb2"], small_target(), 3, seed=1, thin=1, backend="compiled")
    c.step(20, learn=True)
    c.start_mixing()
    calls = counting_pieces(monkeypatch)
    for _ in range(30):
        c.step(1)
    assert len(calls) == 1
