"""The locally balanced samplers with exact ratios take compiled frozen steps on an RBM (issue 45
item 3): ``barker``, ``sqrt``, ``min``, ``max``, LSB 1 and LSB 2 after burn-in give the torch
step's chains from the same uniforms, on both of the kernel's paths (products of the shift
tables where every ratio is bounded, log-ratios elsewhere), keep the torch step's caches exact,
and have the enumerated chain's law.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore.backends.rbm_kernels import LINEAR_LIMIT, has_linear_form
from lsbcore.balancing.functions import NetworkBalancing
from lsbcore.exact.states import all_states, state_codes
from lsbcore.exact.transition import flip_matrix
from lsbcore.samplers.balanced.batched import BatchedBalancedSampler
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.rbm import RBM

pytestmark = pytest.mark.usefixtures("single_thread")

FUNCTIONS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2", "lsb2-monotone")
MODELS = {
    # every |log-ratio| bounded by sum_j |W_jk| + |b_k| <= LINEAR_LIMIT: the products' path
    "bounded": lambda: RBM.random(14, 6, seed=4, scale=0.8),
    # large weights: ratios beyond the bound, the log-ratios' path
    "large weights": lambda: RBM.random(10, 20, seed=6, scale=45.0),
}


def frozen(name, model, backend, n_chains=6, seed=5, learn=40, **options):
    sampler = make_sampler(name, model, n_chains, seed=seed, backend=backend, **options)
    assert sampler.backend == backend
    if sampler.learnable:
        sampler.step(learn, learn=True)  # learned a little: not the initial function
        sampler.balancing.frozen()
    return sampler


def test_the_models_take_both_paths():
    bounds = {k: float(make().kernel_arrays()["ratio_bound"][0]) for k, make in MODELS.items()}
    assert bounds["bounded"] < LINEAR_LIMIT < bounds["large weights"]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_compiled_exact_steps_give_the_torch_steps_chains(name, model):
    target = MODELS[model]()
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = frozen(name, target, backend, resync_every=170)  # a resync inside
        sampler.step(400)
        runs[backend] = sampler
    compiled, torch_run = runs["compiled"], runs["torch"]
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.equal(compiled._n_accepted, torch_run._n_accepted)
    assert 0 < int(compiled._n_accepted.sum()) < 440 * compiled.n_chains  # 40 learning steps
    torch.testing.assert_close(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-8)
    torch.testing.assert_close(compiled._s, torch_run._s, rtol=1e-10, atol=1e-9)
    info, info_t = compiled.step_info, torch_run.step_info
    assert torch.equal(info.site, info_t.site)
    assert torch.equal(info.accepted, info_t.accepted)
    torch.testing.assert_close(info.accept_prob, info_t.accept_prob, rtol=1e-9, atol=1e-12)
    assert compiled.invariant_error() < 1e-9


@pytest.mark.parametrize("model", MODELS)
def test_short_calls_and_a_torch_step_among_them_give_one_long_calls_chains(model):
    target = MODELS[model]()
    long = frozen("lsb1", target, "compiled")
    long.step(60)
    short = frozen("lsb1", target, "compiled")
    for t in range(60):
        short.set_backend("torch" if t == 30 else "compiled")
        short.step(1)
    assert torch.equal(short.x, long.x)
    assert torch.equal(short._n_accepted, long._n_accepted)
    assert short.invariant_error() < 1e-9


@pytest.mark.parametrize("name", ["barker", "lsb2"])
def test_compiled_exact_runs_have_the_enumerated_law(name, exact):
    """On a 5-site RBM, independent compiled chains from every state have the law
    ``start P^t`` after 2 steps and the target's once mixed; ``P``, enumerated from the torch
    chain's flip probabilities, is reversible. (Both take the products' path: barker's
    ``g(t)`` and LSB 2's network's, ``network_terms.network_g``.)"""
    weights = MODELS["bounded"]()
    target = RBM(weights.W[:4, :5], weights.b_visible[:5], weights.b_hidden[:4])
    states = all_states(5)
    copies = 4000 // len(states)
    options = {}
    if name == "lsb2":  # a function learned for a while, then frozen, as "learned" takes it
        options["balancing"] = frozen(name, target, "torch").balancing
        name = "learned"
    probe = make_sampler(name, target, len(states), x0=states, backend="torch", **options)
    p = flip_matrix(probe.flip_probabilities().reshape(len(states), -1))
    pi = torch.softmax(target.log_prob(states), 0).numpy()
    flow = pi[:, None] * p
    assert np.abs(flow - flow.T).max() < 1e-12
    sampler = make_sampler(
        name, target, copies * len(states), seed=9, x0=states.repeat(copies, 1),
        backend="compiled", **options,
    )  # fmt: skip
    assert not sampler.learnable
    law = np.full(len(states), 1.0 / len(states))
    gap = 1.0 - np.sort(np.abs(np.linalg.eigvals(p)))[-2]
    assert gap > 0.005
    done = 0
    for t in (2, math.ceil(12.0 / gap)):
        sampler.step(t - done)
        law = law @ np.linalg.matrix_power(p, t - done)
        done = t
        counts = np.bincount(state_codes(sampler.x).numpy(), minlength=len(law))
        assert exact.tv(law, counts) < exact.tv_threshold(law, sampler.n_chains)


@pytest.mark.parametrize("ratios", ["exact", "gradient"])
def test_a_network_whose_values_underflow_takes_the_log_space_path(ratios):
    """LSB 2 with ``z = -800`` everywhere: ``h = e^-800`` is 0 in float64, so the form on
    ``g(t)`` would make every ``Z`` zero; the kernels keep ``log g`` for it
    (``has_linear_form``) and give the torch chains. ``g = e^-800 (1 + t) / 2`` balances."""
    target = MODELS["bounded"]()
    runs = {}
    for backend in ("compiled", "torch"):
        function = NetworkBalancing(hidden=10, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            function.layer2.weight.zero_()
            function.layer2.bias.fill_(-800.0)
        sampler = BatchedBalancedSampler(
            target, 6, function, ratios=ratios, seed=3, backend=backend
        )
        sampler.step(300)
        runs[backend] = sampler
    function = runs["compiled"]._compiled_function()
    assert not has_linear_form(function)
    assert torch.equal(runs["compiled"].x, runs["torch"].x)
    assert torch.equal(runs["compiled"]._n_accepted, runs["torch"]._n_accepted)
    assert int(runs["compiled"]._n_accepted.sum()) > 0
    assert runs["compiled"].invariant_error() < 1e-9
