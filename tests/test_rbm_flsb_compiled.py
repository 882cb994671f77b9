"""Compiled frozen FLSB steps on an RBM (``samplers.balanced.rbm_steps``, issue 45): after torch
learning steps, FLSB 1 and FLSB 2 take compiled frozen steps that give the torch step's chains,
keep their caches exact, and rebuild the kernel's form of the function when it is learnt
again."""

from __future__ import annotations

import pytest
import torch

from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.rbm import RBM

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("name", ["flsb1", "flsb2"])
@pytest.mark.parametrize("scale", [0.3, 1.5], ids=["mild", "sharp"])
def test_frozen_flsb_steps_give_the_torch_chains(name, scale):
    target = RBM.random(40, 10, seed=3, scale=scale)
    runs = [make_sampler(name, target, 9, seed=5, backend=b, lr=0.05) for b in ("torch", "auto")]
    assert [r.backend for r in runs] == ["torch", "compiled"]
    for run in runs:
        run.step(40, learn=True)  # torch in both: the same function and chains
    torch_run, compiled = runs
    torch_run.step(150)
    compiled.step(20)
    compiled.set_backend("torch")
    compiled.step(5)  # the torch step goes on from the compiled steps' caches
    compiled.set_backend("compiled")
    compiled.step(125)
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    assert compiled.n_accepted == torch_run.n_accepted > 0
    for key in ("site", "accepted"):
        assert torch.equal(compiled.last_proposal[key], torch_run.last_proposal[key])
    assert torch.allclose(
        compiled.last_proposal["accept_prob"], torch_run.last_proposal["accept_prob"], atol=1e-9
    )
    assert compiled.invariant_error() < 1e-10
    assert compiled.n_target_evals == torch_run.n_target_evals


def test_learning_between_frozen_calls_rebuilds_the_kernels_function():
    """A frozen call, more learning, another frozen call: the second reads the new function
    (the torch run, stepped the same way, agrees)."""
    target = RBM.random(30, 8, seed=1, scale=1.0)
    runs = [make_sampler("flsb2", target, 6, seed=2, backend=b, lr=0.1) for b in ("torch", "auto")]
    for run in runs:
        run.step(20, learn=True)
        run.step(30)
        run.step(20, learn=True)
        run.step(30)
    assert torch.equal(runs[0].x, runs[1].x)
    assert runs[1].invariant_error() < 1e-10


def test_exact_ratios_on_an_rbm_stay_torch_in_a_sentence():
    target = RBM.random(12, 3, seed=0)
    assert make_sampler("lsb1", target, 2).backend == "torch"
    with pytest.raises(ValueError, match="reads exact ratios; the compiled steps on an RBM"):
        make_sampler("barker", target, 2, backend="compiled")
