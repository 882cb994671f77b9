"""The Proposal view's maps, its table and the definition agree, in burn-in and in mixing.

For a single-site sampler the map of ``T(x -> x^i) = Q(i | x) A(x, x^i)`` with, for the locally
balanced ones, ``Q(i | x) = g(t_i(x)) / Z(x)`` and ``A = min(1, Z(x) / Z(x^i))``, is computed
here from scratch (every ``Z`` from the target's flip log-ratios and the sampler's current
``g``) and compared with ``flip_probabilities``; the acceptance the next step reports for the
site it proposed must be ``T / Q`` of the map at that site. Learning changes ``g`` every step,
so burn-in is where a stale cache would show (it once did: maps above 1 for LSB 1 and LSB 2).
"""

import pytest
import torch

from lsbcore import REGISTRY, IsingPosterior, make_sampler

SINGLE_SITE = [
    n for n, s in REGISTRY.items() if s.move == "site" and not s.needs_balancing and s.app
]


def definition(sampler) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Q, T)`` ``[B, D]`` from the definitions, by brute force over every site."""
    target, x = sampler.target, sampler.x.reshape(sampler.n_chains, -1)
    if not hasattr(sampler, "balancing"):  # uniform proposal: T = P(flip | i) / D
        q = torch.full_like(x, 1.0 / target.n_sites)
        return q, torch.exp(sampler.flip_log_probs().reshape(x.shape)) * q
    with torch.no_grad():
        log_g = sampler.balancing.log_g(target.flip_log_ratios(x))
        log_z = torch.logsumexp(log_g, 1, keepdim=True)
        q = torch.exp(log_g - log_z)
        log_z_new = torch.empty_like(q)
        for i in range(target.n_sites):
            flipped = x.clone()
            flipped[:, i] = -flipped[:, i]
            log_z_new[:, i] = torch.logsumexp(
                sampler.balancing.log_g(target.flip_log_ratios(flipped)), 1
            )
        return q, q * torch.exp(torch.clamp(log_z - log_z_new, max=0.0))


@pytest.mark.parametrize("phase", ["burnin", "mixing"])
@pytest.mark.parametrize("name", SINGLE_SITE)
def test_maps_table_and_definition_agree(name, phase, backend):
    torch.manual_seed(0)
    alpha = torch.randn(2, 4, 5, dtype=torch.float64) * 2
    target = IsingPosterior(alpha, 0.8, boundary="periodic")
    sampler = make_sampler(name, target, 2, seed=3, backend=backend)
    learn = phase == "burnin" and sampler.learnable
    for _ in range(6):
        sampler.step(7, learn=learn)  # learning moves g between every step
        if learn:
            assert not sampler.learning_failed
        q_def, t_def = definition(sampler)
        t_map = sampler.flip_probabilities().reshape(t_def.shape)
        q_map = torch.exp(sampler.proposal_log_probs()).reshape(q_def.shape)
        torch.testing.assert_close(q_map, q_def, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(t_map, t_def, rtol=1e-9, atol=1e-12)
        assert float(t_map.max()) <= 1.0 and float(t_map.sum(1).max()) <= 1.0 + 1e-12
        sampler.step(1, learn=learn)
        last = sampler.last_proposal
        rows = torch.arange(2)
        site = last["site"]
        torch.testing.assert_close(
            last["accept_prob"], t_def[rows, site] / q_def[rows, site], rtol=1e-9, atol=1e-12
        )
