"""Block Gibbs on the device (``backends.device.checkerboard``), in Triton's CPU interpreter (or
on CUDA, ``device_mode``): fed the uniforms the compiled CPU kernel reads, it makes the same
sweeps, bitwise, and its chains reach the exact posterior of a 3x3 lattice."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from device_mode import DEVICE, ON_GPU, cpu_uniforms  # before Triton: the interpreter's switch

pytest.importorskip("triton")

from lsbcore import IsingPosterior, PairwiseMRF, make_sampler  # noqa: E402
from lsbcore.backends import kernels  # noqa: E402
from lsbcore.backends.device.checkerboard import BlockSweeps, pull_tables  # noqa: E402
from lsbcore.backends.structures import Chains, Tables  # noqa: E402


def random_network(n: int = 12, seed: int = 3) -> PairwiseMRF:
    """A sparse random graph: its greedy colouring needs more than two colours."""
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(n, n, generator=generator, dtype=torch.float64) * 0.5
    upper = torch.triu(weights * (torch.rand(n, n, generator=generator) < 0.4), 1)
    return PairwiseMRF(torch.randn(n, generator=generator, dtype=torch.float64), upper + upper.T)


TARGETS = {
    "3x3-free": lambda: IsingPosterior(torch.randn(3, 3, dtype=torch.float64), 0.7, "free"),
    "4x5-periodic": lambda: IsingPosterior(torch.randn(4, 5, dtype=torch.float64), 0.4, "periodic"),
    "network": random_network,
}


def pair(target, n_chains: int, **options):
    """The same sampler on the compiled kernel (CPU) and on the device kernels."""
    compiled = make_sampler("checkerboard", target, n_chains, backend="compiled", **options)
    device = make_sampler(
        "checkerboard", target, n_chains, backend="device", device=DEVICE, **options
    )
    cpu_uniforms(device, twin=compiled)
    return compiled, device


def assert_same_chains(compiled, device) -> None:
    """States, log-ratios and counts bitwise (on CUDA the log-ratios' exact resync runs torch's
    CUDA operations: within rounding there), statistics within rounding."""
    assert torch.equal(compiled._x, device._x.cpu())
    if ON_GPU:
        torch.testing.assert_close(device._s.cpu(), compiled._s, rtol=1e-12, atol=1e-12)
    else:
        assert torch.equal(compiled._s, device._s)
    assert compiled.n_accepted == device.n_accepted
    if compiled._tracking:
        stats = device.statistics.cpu()
        torch.testing.assert_close(stats, compiled.statistics, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", TARGETS)
def test_device_sweeps_are_the_compiled_sweeps_step_by_step(name):
    """From one seed, after every sweep: the same states and log-ratios (bitwise), the same
    flip counts, and the statistics within rounding (log p~ is summed in another order)."""
    torch.manual_seed(0)
    target = TARGETS[name]()
    truth = torch.where(torch.arange(target.n_sites) % 3 == 0, 1.0, -1.0).view(target.shape)
    compiled, device = pair(target, 3, seed=5, resync_every=11)
    for sampler in (compiled, device):
        sampler.track_statistics(truth)
    for m in (1, 1, 2, 7, 1, 13):  # chunks of several sweeps, across resyncs
        traces = [torch.zeros(m, 3, 5, dtype=torch.float64) for _ in range(2)]
        compiled.step(m, trace=traces[0])
        device.step(m, trace=traces[1])
        assert_same_chains(compiled, device)
        assert torch.equal(traces[0][:, :, 3:], traces[1][:, :, 3:])  # flips per sweep, -1
        torch.testing.assert_close(traces[1][:, :, :3], traces[0][:, :, :3], rtol=1e-12, atol=1e-12)
    assert device.invariant_error() < 1e-12
    if name == "network":
        assert int(target.colouring().max()) + 1 > 2


def test_small_tiles_split_chains_and_sites_into_many_programs(monkeypatch):
    """Tiles of 8 sites, one chain each: several programs per row, their statistics added
    per chunk, the same chains as the compiled sweep."""
    from lsbcore.backends.device import checkerboard

    monkeypatch.setattr(checkerboard, "MAX_TILE", 8)
    compiled, device = pair(TARGETS["4x5-periodic"](), 2, seed=2)
    for sampler in (compiled, device):
        sampler.track_statistics()
        sampler.step(3)
    assert device._sweeps[1].grid == (2, 3)
    assert_same_chains(compiled, device)


def kernel_inputs(target, n_chains: int, m: int, seed: int):
    """Both kernels' inputs for ``m`` sweeps from one generator: the states, their exact
    log-ratios and ``u [m, B, D]``."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.where(torch.rand(n_chains, target.n_sites, generator=generator) < 0.5, 1.0, -1.0)
    s = target.flip_log_ratios(x.view(n_chains, *target.shape)).reshape(n_chains, -1)
    u = torch.rand(m, n_chains, target.n_sites, generator=generator, dtype=torch.float64)
    return x.double().contiguous(), s.contiguous(), u


def compiled_sweeps(target, x, s, u) -> tuple[torch.Tensor, torch.Tensor]:
    x, s = x.clone(), s.clone()
    n_chains = x.shape[0]
    sign = torch.where(target.neighbourhood == torch.arange(target.n_sites)[:, None], -1.0, 1.0)
    tables = Tables(
        target.neighbourhood.numpy(), sign.double().numpy(), target.coupling.numpy(),
        np.ones(target.neighbourhood.shape),
    )  # fmt: skip
    chains = Chains(
        x.numpy(), s.numpy(), np.zeros((n_chains, 1), dtype=np.int64), np.zeros((n_chains, 3)),
        np.zeros(target.n_sites), False, np.zeros((0, n_chains, 5)),
    )  # fmt: skip
    order = torch.argsort(target.colouring(), stable=True).numpy().astype(np.int64)
    kernels.checkerboard_steps(u.shape[0], chains, tables, order, u.numpy(), np.zeros(n_chains))
    return x, s


def device_sweeps(target, x, s, u) -> tuple[torch.Tensor, torch.Tensor]:
    x, s, u = (v.to(DEVICE, copy=True) for v in (x, s, u))
    colour = target.colouring()
    sweeps = BlockSweeps(target.neighbourhood, target.coupling, colour, x.shape[0], x.device)
    sweeps.run(x, s, u, torch.zeros(target.n_sites, dtype=torch.float64, device=DEVICE))
    return x.cpu(), s.cpu()


def test_the_comparison_sees_a_single_changed_uniform():
    """The step-by-step check is not vacuous: one uniform moved across its site's flip
    probability, in the first sweep, gives other chains than the CPU kernel's."""
    target = IsingPosterior(torch.randn(4, 5, dtype=torch.float64), 0.6, "periodic")
    x, s, u = kernel_inputs(target, 2, 1, seed=7)
    expected = compiled_sweeps(target, x, s, u)
    same = zip(device_sweeps(target, x, s, u), expected, strict=True)
    assert all(torch.equal(a, b) for a, b in same)
    assert int(target.colouring()[0]) == 0  # site 0 is visited first: its s is the start's
    probability = torch.sigmoid(s[1, 0])
    perturbed = u.clone()
    perturbed[0, 1, 0] = 0.5 * probability if u[0, 1, 0] >= probability else 0.5 + probability / 2
    x_new, s_new = device_sweeps(target, x, s, perturbed)
    assert x_new[1, 0] == -expected[0][1, 0]
    assert not torch.equal(s_new[1], expected[1][1])  # its neighbours' log-ratios moved too
    assert torch.equal(x_new[0], expected[0][0])  # the other chain read none of it


def test_pull_tables_list_each_sites_neighbours_in_increasing_order():
    target = random_network()
    sites, weights = pull_tables(target.neighbourhood.numpy(), target.coupling.numpy())
    for j in range(target.n_sites):
        real = sites[j] != j
        listed = sites[j][real]
        assert list(listed) == sorted(listed)
        expected = sorted(int(i) for i in target.neighbourhood[j] if i != j)
        assert list(listed) == expected
        for i, w in zip(listed, weights[j][real], strict=True):
            k = int((target.neighbourhood[i] == j).nonzero())
            assert w == float(target.coupling[i, k])  # the coupling as the CPU flip reads it
        assert (weights[j][~real] == 0).all()


def test_device_block_gibbs_matches_the_exact_posterior(exact, monkeypatch):
    """Many chains of a 3x3 lattice, in a few hundred sweeps: within the Monte Carlo threshold
    of the enumerated posterior (all chains in one program: the interpreter pays per
    operation, not per element)."""
    from lsbcore.backends.device import checkerboard

    monkeypatch.setattr(checkerboard, "MAX_TILE", 4096)
    alpha = exact.random_alpha((3, 3), scale=0.6, seed=2)
    target = IsingPosterior(alpha, 0.5, "free")
    sampler = make_sampler("checkerboard", target, 256, seed=3, backend="device", device=DEVICE)
    counts = exact.histogram(sampler, burn_in=10, thin=2, draws=100)
    p = exact.exact_posterior(target)
    assert exact.tv(p, counts) < exact.tv_threshold(p, int(counts.sum()))


@pytest.mark.skipif(ON_GPU, reason="checks the CPU's refusal")
def test_the_device_backend_is_explicit_only(monkeypatch):
    from lsbcore.backends import resolve_backend

    cpu = torch.device("cpu")
    assert resolve_backend("auto", cpu) == "compiled"
    assert resolve_backend("device", cpu) == "device"  # the interpreter is on in this module
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="runs Triton kernels on a CUDA GPU"):
        resolve_backend("device", cpu)
    with pytest.raises(ValueError, match="runs Triton kernels on a CUDA GPU"):
        make_sampler("checkerboard", TARGETS["3x3-free"](), 2, backend="device")


def test_the_benchmark_times_the_device_kernels_on_cuda():
    from lsbcore.studies.benchmarks import samplers as bench

    assert bench.backend_for(torch.device("cuda"), torch_steps=False) == "device"
    assert bench.backend_for(torch.device("cuda"), torch_steps=True) == "torch"
    assert bench.backend_for(torch.device("cpu"), torch_steps=False) == "auto"  # compiled
