"""Compiled frozen FLSB steps on an RBM (``samplers.balanced.rbm_steps``, issue 45): after
learning steps (compiled, ``tests/test_rbm_learning_compiled.py``),
FLSB 1 takes compiled frozen steps (as does FLSB with a fixed function) that give the torch
step's chains and keep the caches exact; the kernel's form of the function is built again after
more learning; FLSB 2 and LSB 2 run compiled at every size."""

from __future__ import annotations

import pytest
import torch

from lsbcore.backends.rbm_kernels import has_linear_form
from lsbcore.balancing.functions import FixedBalancing
from lsbcore.samplers.balanced.batched import BatchedBalancedSampler
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.rbm import RBM

pytestmark = pytest.mark.usefixtures("single_thread")


def build(name: str, target, backend: str):
    if name == "flsb1":
        return make_sampler(name, target, 9, seed=5, backend=backend, lr=0.05)
    return BatchedBalancedSampler(
        target, 9, FixedBalancing(name), ratios="gradient", seed=5, backend=backend
    )


@pytest.mark.parametrize("name", ["flsb1", "barker", "min", "max"])
@pytest.mark.parametrize("scale", [0.3, 1.5], ids=["mild", "sharp"])
def test_frozen_flsb_steps_give_the_torch_chains(name, scale):
    target = RBM.random(40, 10, seed=3, scale=scale)
    runs = [build(name, target, backend) for backend in ("torch", "auto")]
    assert [r.backend for r in runs] == ["torch", "compiled"]
    for run in runs:
        if run.learnable:
            run.step(40, learn=True)  # the same function and chains on both backends
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


def test_ratios_beyond_the_linear_range_take_the_log_space_proposal():
    """A sharp RBM whose first-order ratios pass +-600: the kernel's log-space path, the same
    chains."""
    target = RBM.random(30, 6, seed=2, scale=150.0)  # |W| up to 484, within MAX_SHIFT
    runs = [build("max", target, backend) for backend in ("torch", "auto")]
    assert float(runs[0]._s_tilde.abs().max()) > 600
    for run in runs:
        run.step(60)
    assert torch.equal(runs[0].x, runs[1].x)
    assert runs[1].invariant_error() < 1e-10


def test_learning_between_frozen_calls_rebuilds_the_kernels_function():
    """A frozen call, more learning, another frozen call: the second reads the new weights
    (the torch run, stepped the same way, agrees)."""
    target = RBM.random(30, 8, seed=1, scale=1.0)
    runs = [make_sampler("flsb1", target, 6, seed=2, backend=b, lr=0.3) for b in ("torch", "auto")]
    for run in runs:
        run.step(20, learn=True)
        run.step(30)
        run.step(20, learn=True)
        run.step(30)
    assert torch.equal(runs[0].x, runs[1].x)
    assert runs[1].invariant_error() < 1e-10


def test_flsb2_and_lsb2_run_compiled_at_every_size_and_give_the_torch_chains():
    """``"auto"`` takes the kernels for LSB 2's network with either kind of ratios, on few
    chains of a small RBM (as the RBM page runs it) as on many chains of a large one (measured
    faster everywhere, BENCHMARKS.md); the network takes the kernels' form on ``g`` itself.
    Either way the torch chains."""
    small, large = RBM.random(12, 3, seed=0), RBM.random(100, 25, seed=0)
    for name in ("flsb2", "lsb2", "flsb1", "lsb1"):
        for target, chains in ((small, 8), (large, 100)):
            assert make_sampler(name, target, chains).backend == "compiled"
    target = RBM.random(40, 10, seed=3, scale=1.5)
    runs = []
    for backend in ("torch", "compiled"):
        sampler = make_sampler("flsb2", target, 9, seed=5, backend=backend)
        sampler.step(40, learn=True)  # the same function on both backends
        sampler.balancing.frozen()
        sampler.step(200)
        runs.append(sampler)
        if backend == "compiled":
            assert has_linear_form(sampler._compiled_function())
    assert torch.equal(runs[0].x, runs[1].x)
    assert runs[0].n_accepted == runs[1].n_accepted > 0
    assert runs[1].invariant_error() < 1e-10
