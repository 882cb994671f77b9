"""Learning steps on the device (``backends.device.mixture`` and ``network``), in Triton's CPU
interpreter (or on CUDA, ``device_mode``): fed the compiled CPU kernels' uniforms they choose
the same sites, make the same decisions and leave the same chains, step by step, with the same
parameters, optimiser state, losses and weights within rounding; restarts, the authors'
objective, both optimisers, forced rebuilds and a divergence included."""

from __future__ import annotations

import pytest
import torch
from device_mode import DEVICE, ON_GPU, cpu_uniforms  # before Triton: the interpreter's switch

pytest.importorskip("triton")

from lsbcore import IsingPosterior, PairwiseMRF, make_sampler  # noqa: E402
from lsbcore.backends.device import network as network_kernels  # noqa: E402

LEARNED = ["lsb1", "lsb2"]


def lattice(shape, boundary: str, scale: float = 1.0, seed: int = 0) -> IsingPosterior:
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.randn(*shape, generator=generator, dtype=torch.float64) * scale
    return IsingPosterior(alpha, 0.5, boundary)


def network(n: int = 10, seed: int = 4) -> PairwiseMRF:
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(n, n, generator=generator, dtype=torch.float64) * 0.5
    upper = torch.triu(weights * (torch.rand(n, n, generator=generator) < 0.4), 1)
    return PairwiseMRF(torch.randn(n, generator=generator, dtype=torch.float64), upper + upper.T)


def pair(name, target, n_chains=3, **options):
    """The same learner on the compiled kernels (CPU) and on the device kernels."""
    options.setdefault("restart_prob", 0.0)
    compiled = make_sampler(name, target, n_chains, seed=7, backend="compiled", **options)
    device = make_sampler(
        name, target, n_chains, seed=7, backend="device", device=DEVICE, **options
    )
    cpu_uniforms(device, twin=compiled)
    for sampler in (compiled, device):
        sampler.track_statistics(torch.ones(target.shape))
    return compiled, device


def close(a, b, rtol=1e-10):
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=rtol, atol=rtol)


def assert_same_learners(compiled, device) -> None:
    """States, sites and decisions exactly; parameters, optimiser state, the objective's
    log p~ and the history within rounding (other exp/log, other summation order)."""
    assert torch.equal(compiled._x, device._x.cpu())
    close(device._s, compiled._s, 1e-12)
    assert compiled.n_steps == device.n_steps
    assert compiled.n_accepted == device.n_accepted
    assert compiled.learning_failed == device.learning_failed
    ours = {k: v.cpu() for k, v in device.last_proposal.items()}
    theirs = compiled.last_proposal
    assert torch.equal(ours["site"], theirs["site"])
    assert torch.equal(ours["accepted"], theirs["accepted"])
    for a, b in zip(compiled._learned_params(), device._learned_params(), strict=True):
        close(b, a)
    close(device._kernel_state, compiled._kernel_state)
    close(device._log_p_learning, compiled._log_p_learning)
    close(device.statistics, compiled.statistics, 1e-12)
    ours, theirs = device.history.arrays(), compiled.history.arrays()
    assert ours["step"].tolist() == theirs["step"].tolist()
    for field in ("loss", "eta", "weights"):
        close(torch.from_numpy(ours[field]), torch.from_numpy(theirs[field]))


@pytest.fixture
def split(monkeypatch):
    """LSB 2's lattice-wide terms in their own kernel, over blocks of 16 sites (large lattices'
    layout: two launches a step), even on these small lattices."""
    monkeypatch.setattr(network_kernels, "SPLIT_ABOVE", 0)
    monkeypatch.setattr(network_kernels, "SPAN", 16)
    monkeypatch.setattr(network_kernels, "SPAN_TILE", 4)
    grids, kernel = [], network_kernels.lattice_kernel

    class Counted:  # the grids the lattice kernel is launched with
        def __getitem__(self, grid):
            grids.append(grid)
            return kernel[grid]

    monkeypatch.setattr(network_kernels, "lattice_kernel", Counted())
    return grids


TARGETS = {
    "3x3-free": lambda: lattice((3, 3), "free"),
    "4x5-periodic": lambda: lattice((4, 5), "periodic"),
    "network": network,
}


# every target for LSB 1; LSB 2, slower in the interpreter, on the periodic lattice and the
# network (its free-boundary case runs in the rebuild test)
@pytest.mark.parametrize(
    "name,target_name",
    [("lsb1", target) for target in TARGETS] + [("lsb2", "4x5-periodic"), ("lsb2", "network")],
)
def test_device_learning_is_the_compiled_learning_step_by_step(name, target_name):
    compiled, device = pair(name, TARGETS[target_name](), resync_every=10)
    for m in (1, 2, 6, 4):  # chunks of several steps, across a resync
        traces = [torch.zeros(m, 3, 5, dtype=torch.float64) for _ in range(2)]
        compiled.step(m, learn=True, trace=traces[0])
        device.step(m, learn=True, trace=traces[1])
        assert torch.equal(traces[0][:, :, 3:], traces[1][:, :, 3:])  # decisions, sites
        close(traces[1], traces[0], 1e-12)
        assert_same_learners(compiled, device)
    device.step(5)  # frozen steps after learning: the caches hold
    assert device.invariant_error() < 1e-12


@pytest.mark.parametrize("name", LEARNED)
def test_sgd_the_authors_objective_and_restarts_are_the_compiled_ones(name):
    """SGD with momentum, the authors' log p~ and restarts (drawn on the host between chunks
    from the same generator) follow the compiled steps as well."""
    target = lattice((4, 4), "periodic", seed=3)
    compiled, device = pair(
        name, target, n_chains=5, optimizer="sgd", lr=0.05, objective="authors",
        restart_prob=0.05,
    )  # fmt: skip
    restarts = []
    restart = device._restart_some_chains
    device._restart_some_chains = lambda: (restarts.append(device.n_steps), restart())[1]
    for m in (7, 13):
        compiled.step(m, learn=True)
        device.step(m, learn=True)
        assert_same_learners(compiled, device)
    assert restarts  # chains did restart in between


@pytest.mark.parametrize("name", LEARNED)
def test_rebuilds_when_a_scale_goes_stale_are_the_compiled_ones(name):
    """A strong field puts log-ratios near +-300: the cached components (LSB 1) or the site
    scale (LSB 2) leave their range and are rebuilt, at the same steps as on the CPU. SGD: the
    gradient is about 1e-118 here, and Adam's step ``g / (|g| + eps)`` would turn its rounding
    (the compiled kernel's sums are reassociated) into moves of 1e-9."""
    target = lattice((4, 5), "free", scale=150.0, seed=1)
    compiled, device = pair(name, target, n_chains=4, resync_every=10**6, optimizer="sgd")
    scales = []
    for _ in range(6):
        compiled.step(2, learn=True)
        device.step(2, learn=True)
        assert_same_learners(compiled, device)
        cache = device._learning_state[2]
        scales.append(cache["shift" if name == "lsb1" else "top"].clone())
    assert any(not torch.equal(a, b) for a, b in zip(scales, scales[1:], strict=False))


@pytest.mark.parametrize("name", LEARNED)
def test_a_divergence_stops_learning_at_the_same_step(name):
    """A NaN log p~ makes the loss NaN: the device chunk stops after that step, restores the
    parameters, and the sampler goes on frozen, as the compiled one does."""
    compiled, device = pair(name, lattice((3, 3), "free"), n_chains=4)
    for sampler in (compiled, device):
        sampler.step(3, learn=True)
        sampler._log_p_learning = torch.full(
            (4,), float("nan"), dtype=torch.float64, device=sampler.device
        )
        sampler._log_p_step = sampler.n_steps
        with pytest.warns(RuntimeWarning, match="stops learning"):
            sampler.step(6, learn=True)
    assert device.learning_failed and device.n_steps == 9
    d = device.n_sites  # the frozen steps after it may differ in padding columns only
    assert torch.equal(compiled._x[:, :d], device._x[:, :d].cpu())
    for a, b in zip(compiled._learned_params(), device._learned_params(), strict=True):
        close(b, a)


@pytest.mark.parametrize("name", LEARNED)
def test_the_comparison_sees_a_changed_proposal_uniform(name, monkeypatch):
    """The step-by-step check is not vacuous: other site uniforms (the proposal's and x~'s) in
    the first step give another loss than the CPU's."""
    compiled, device = pair(name, lattice((4, 5), "periodic"), n_chains=3)
    draw = device._draw_uniforms

    def perturbed(m, width):
        u = draw(m, width)
        u[0, :, 1::2] = (u[0, :, 1::2] + 0.5) % 1.0
        return u

    monkeypatch.setattr(device, "_draw_uniforms", perturbed)
    compiled.step(1, learn=True)
    device.step(1, learn=True)
    with pytest.raises(AssertionError):
        assert_same_learners(compiled, device)


def test_lsb2_with_its_lattice_terms_split_over_programs_is_the_compiled_learning(split):
    compiled, device = pair("lsb2", TARGETS["4x5-periodic"](), resync_every=7)
    for m in (1, 6, 3):  # across a resync
        compiled.step(m, learn=True)
        device.step(m, learn=True)
        assert_same_learners(compiled, device)
    assert split == [(3, 2)] * 10  # one launch a step: a program per chain and 16 sites


def test_split_lsb2_rescales_and_stops_as_the_compiled_one(split):
    """The stale-scale path and a divergence with the lattice kernel in its own launches."""
    target = lattice((4, 5), "free", scale=150.0, seed=1)
    compiled, device = pair("lsb2", target, n_chains=4, resync_every=10**6, optimizer="sgd")
    tops = []
    for _ in range(3):
        compiled.step(2, learn=True)
        device.step(2, learn=True)
        assert_same_learners(compiled, device)
        tops.append(device._learning_state[2]["top"].clone())
    assert any(not torch.equal(a, b) for a, b in zip(tops, tops[1:], strict=False))
    for sampler in (compiled, device):
        sampler._log_p_learning = torch.full(
            (4,), float("nan"), dtype=torch.float64, device=sampler.device
        )
        sampler._log_p_step = sampler.n_steps
        with pytest.warns(RuntimeWarning, match="stops learning"):
            sampler.step(4, learn=True)
    assert device.learning_failed and device.n_steps == compiled.n_steps == 10
    d = device.n_sites
    assert torch.equal(compiled._x[:, :d], device._x[:, :d].cpu())


@pytest.mark.skipif(ON_GPU, reason="the compiled backend runs on the CPU only")
@pytest.mark.parametrize("name", LEARNED)
def test_switching_backends_while_learning_keeps_the_compiled_chains(name):
    """Device, compiled, device again: each backend holds its learning cache in its own form
    and rebuilds it after a switch, so the chains stay the compiled sampler's."""
    compiled, device = pair(name, lattice((4, 5), "periodic"))
    for backend in ("device", "compiled", "device"):
        device.set_backend(backend)
        compiled.step(2, learn=True)
        device.step(2, learn=True)
        assert_same_learners(compiled, device)


@pytest.mark.parametrize("name", LEARNED)
def test_more_chains_than_a_learning_kernels_lanes_learn_with_torch_steps(name, monkeypatch):
    """Above ``learning.MAX_LANES`` chains the device backend learns with torch steps (one
    program cannot hold them all) and its chains are the torch backend's, step for step."""
    from lsbcore.backends.device import learning, mixture

    monkeypatch.setattr(learning, "MAX_LANES", 2)

    def launched(*args, **kwargs):
        raise AssertionError("a learning kernel was launched for more chains than its lanes")

    monkeypatch.setattr(mixture, "mixture_learning_steps", launched)
    monkeypatch.setattr(network_kernels, "network_learning_steps", launched)
    target = lattice((3, 3), "free")
    on_torch = make_sampler(name, target, 3, seed=7, backend="torch", restart_prob=0.0)
    device = make_sampler(
        name, target, 3, seed=7, backend="device", device=DEVICE, restart_prob=0.0
    )
    cpu_uniforms(device, twin=on_torch)
    for sampler in (on_torch, device):
        sampler.step(6, learn=True)
    assert not device._has_device_learning()
    assert torch.equal(on_torch._x, device._x.cpu())
    assert on_torch.n_steps == device.n_steps == 6
    for ours, theirs in zip(device._learned_params(), on_torch._learned_params(), strict=True):
        close(ours, theirs, 1e-12)
    monkeypatch.setattr(learning, "MAX_LANES", 128)
    assert device._has_device_learning()  # the paper's chains stay on the kernels
