"""The objective's two forms of ``log p~(x')``: exact, and as the authors' code computes it
(their ``self_sampler.py`` drops ``x_i`` on the coupling term). The authors' form is written
here from their formula, on the lattice, independently of the library's flip tables."""

from __future__ import annotations

import pytest
import torch

from lsbcore import IsingPosterior, make_sampler, paper_case
from lsbcore.balancing.objective import authors_log_ratio


def neighbour_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum of the four neighbours on a periodic lattice ``[B, n, n]``."""
    return sum(torch.roll(x, shift, dim) for shift in (1, -1) for dim in (1, 2))


def test_authors_log_ratio_is_their_formula_and_differs_only_where_x_is_minus_one():
    gen = torch.Generator().manual_seed(0)
    n, lam = 5, 0.8
    alpha = torch.randn(3, n, n, generator=gen, dtype=torch.float64)
    x = torch.randint(0, 2, (3, n, n), generator=gen).double() * 2 - 1
    target = IsingPosterior(alpha, lam, boundary="periodic")
    s = target.flip_log_ratios(x)
    theirs = -2.0 * alpha * x - 2.0 * lam * neighbour_sum(x)  # their log p~(x') - log p~(x)
    ours = authors_log_ratio(s, x, alpha)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    # the exact ratio is -2 x (alpha + lambda * neighbours): equal where x = +1 only
    torch.testing.assert_close(s[x > 0], theirs[x > 0], rtol=0, atol=1e-12)
    gap = (s - theirs)[x < 0].abs()
    torch.testing.assert_close(gap, (4.0 * lam * neighbour_sum(x))[x < 0].abs())
    assert gap.max() > 1.0


def learned(objective: str, lam: float, backend: str, name: str = "lsb1"):
    case = paper_case(4, n=8, n_chains=4, start="per_chain")
    target = IsingPosterior(case.target.field.view(4, 8, 8), lam, boundary="periodic")
    sampler = make_sampler(
        name, target, 4, seed=2, x0=case.x0, objective=objective, backend=backend
    )
    sampler.step(60, learn=True)
    return torch.nn.utils.parameters_to_vector(sampler.balancing.parameters()).detach()


@pytest.mark.parametrize("backend", ["compiled", "torch"])
def test_the_authors_form_changes_learning_only_through_the_coupling(backend):
    """Without coupling their formula is exact, so both forms learn the same function; with
    coupling they learn different ones."""
    torch.testing.assert_close(
        learned("exact", 0.0, backend), learned("authors", 0.0, backend), rtol=0, atol=0
    )
    assert not torch.allclose(learned("exact", 1.0, backend), learned("authors", 1.0, backend))


def test_an_unknown_objective_is_refused():
    case = paper_case(1, n=4, n_chains=2)
    with pytest.raises(ValueError, match="objective must be one of"):
        make_sampler("lsb1", case.target, 2, objective="paper")
