"""The target protocol's defaults, the batched sampler base, and the registry's refusals."""

from __future__ import annotations

import pytest
import torch

from lsbcore import PairwiseMRF, make_sampler
from lsbcore.exact.states import all_states
from lsbcore.samplers.registry import REGISTRY, refusal, samplers_for
from lsbcore.targets.base import Target
from tests.batched_support import UniformMetropolis


class TableTarget(Target):
    """``log p~`` an arbitrary table over all ``2^n`` states (-inf: zero mass); nothing else."""

    def __init__(self, log_table: torch.Tensor, provides=frozenset()):
        self.n_sites = int(log_table.numel()).bit_length() - 1
        self.shape = (self.n_sites,)
        self.log_table = log_table
        self.provides = frozenset(provides)

    def log_prob(self, x):
        flat = self._flat(x)
        codes = ((flat > 0).long() << torch.arange(self.n_sites)).sum(1)
        return self.log_table[codes]


class SmoothTarget(Target):
    """A cubic ``log p~`` written in differentiable operations: the default gradient applies."""

    provides = frozenset({"gradient"})

    def __init__(self, n: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.n_sites, self.shape = n, (n,)
        self.a = torch.randn(n, generator=g, dtype=torch.float64)
        self.c = torch.randn(n, n, n, generator=g, dtype=torch.float64) * 0.1

    def log_prob(self, x):
        x = self._flat(x)
        return x @ self.a + torch.einsum("bi,bj,bk,ijk->b", x, x, x, self.c)


def random_table(n: int, seed: int, zeros: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(2**n, generator=g, dtype=torch.float64) * 2.0
    if zeros:
        table[torch.randperm(2**n, generator=g)[:zeros]] = -torch.inf
    return table


def test_default_flip_log_ratios_are_log_prob_differences():
    target = TableTarget(random_table(5, 0, zeros=6))
    x = all_states(5)
    s = target.flip_log_ratios(x)
    for i in range(5):
        flipped = x.clone()
        flipped[:, i] *= -1
        expected = target.log_prob(flipped) - target.log_prob(x)
        finite = torch.isfinite(target.log_prob(x))
        torch.testing.assert_close(s[finite, i], expected[finite])
    # a flip into zero mass is -inf, never NaN, from a state of positive mass
    assert not torch.isnan(s[torch.isfinite(target.log_prob(x))]).any()
    assert torch.isneginf(s).any()


def test_conditional_log_odds_and_log_ratio():
    target = TableTarget(random_table(4, 1))
    x = all_states(4)
    odds = target.conditional_log_odds(x)
    plus, minus = x.clone(), x.clone()
    plus[:, 2], minus[:, 2] = 1.0, -1.0
    torch.testing.assert_close(odds[:, 2], target.log_prob(plus) - target.log_prob(minus))
    y = x.flip(0)
    torch.testing.assert_close(target.log_ratio(x, y), target.log_prob(y) - target.log_prob(x))


def test_default_gradient_by_autograd_and_its_absence():
    target = SmoothTarget(4)
    x = all_states(4)
    grad = target.grad_log_prob(x)
    step = 1e-6
    for i in range(4):
        e = torch.zeros(4, dtype=torch.float64)
        e[i] = step
        numeric = (target.log_prob(x + e) - target.log_prob(x - e)) / (2 * step)
        torch.testing.assert_close(grad[:, i], numeric, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="no differentiable log p~"):
        TableTarget(random_table(3, 0)).grad_log_prob(all_states(3))


def test_pairwise_targets_answer_the_protocol_exactly():
    g = torch.Generator().manual_seed(2)
    J = torch.triu(torch.randn(6, 6, generator=g, dtype=torch.float64), 1)
    target = PairwiseMRF(torch.randn(6, generator=g, dtype=torch.float64), J + J.T)
    x = all_states(6)
    s = target.flip_log_ratios(x)
    torch.testing.assert_close(s, Target.flip_log_ratios(target, x))  # the default's answer
    grad = target.grad_log_prob(x)
    torch.testing.assert_close(-2.0 * x * grad, s)  # first order is exact on a pairwise model
    y = x[torch.randperm(len(x), generator=g)]
    after, _ = target.flip_log_ratios_after(x, y, s, None)
    torch.testing.assert_close(after, target.flip_log_ratios(y))
    assert {"pairwise", "incremental", "gradient", "tempering"} <= target.provides


def test_batched_base_keeps_its_caches_and_traces():
    target = TableTarget(random_table(6, 3, zeros=10))
    sampler = UniformMetropolis(target, 16, seed=4)
    sampler.track_statistics()
    trace = torch.zeros(50, 16, 5, dtype=torch.float64)
    sampler.step(50, trace=trace)
    assert sampler.invariant_error() < 1e-12
    assert torch.isfinite(sampler.log_p).all()  # never moved into zero mass
    torch.testing.assert_close(trace[-1, :, 0], target.log_prob(sampler._x))
    assert set(trace[:, :, 3].unique().tolist()) <= {0.0, 1.0}
    assert sampler.n_steps == 50 and sampler.n_site_updates == 50
    assert sampler.n_accepted == int(trace[:, :, 3].sum())


def test_batched_base_is_reproducible_and_starts_where_p_is_positive():
    target = TableTarget(random_table(6, 5, zeros=30))
    a, b = UniformMetropolis(target, 8, seed=9), UniformMetropolis(target, 8, seed=9)
    a.step(40)
    b.step(40)
    assert torch.equal(a.x, b.x)
    zero = all_states(6)[torch.isneginf(target.log_table)][:1]
    with pytest.raises(ValueError, match="probability zero"):
        UniformMetropolis(target, 1, x0=zero)
    with pytest.raises(ValueError, match="serves the pairwise samplers only"):
        UniformMetropolis(target, 1, backend="compiled")


def test_registry_refuses_what_cannot_work_in_a_sentence():
    target = TableTarget(random_table(4, 0))
    reason = refusal("checkerboard", target)
    assert reason == (
        "the 'checkerboard' sampler needs a pairwise model (its flip tables), which "
        "TableTarget on 4 sites does not provide."
    )
    with pytest.raises(ValueError, match="needs a pairwise model"):
        make_sampler("checkerboard", target, 2)
    assert "checkerboard" not in samplers_for(target)
    ising_like = PairwiseMRF(torch.zeros(4), torch.zeros(4, 4))
    # all but neural-block, whose tiles need a grid (a PairwiseMRF lies in a row)
    assert samplers_for(ising_like) == tuple(n for n in REGISTRY if n != "neural-block")
    assert "rows and columns" in refusal("neural-block", ising_like)
    for name, spec in REGISTRY.items():
        if spec.needs:
            missing = TableTarget(random_table(4, 0))
            assert refusal(name, missing) is not None


def test_default_start_redraws_zero_mass_and_says_when_it_finds_none():
    target = TableTarget(random_table(6, 5, zeros=60))  # 4 states of 64 carry mass
    x = target.start(50, torch.Generator().manual_seed(0))
    assert torch.isfinite(target.log_prob(x)).all()
    nothing = TableTarget(torch.full((8,), -torch.inf, dtype=torch.float64))
    with pytest.raises(ValueError, match="no state of positive probability was found"):
        nothing.start(3, torch.Generator().manual_seed(0), tries=5)
