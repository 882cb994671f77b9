"""Frozen locally balanced steps on the device (``backends.device.balanced``), in Triton's CPU
interpreter (or on CUDA, ``device_mode``), for the six functions of the paper comparison (the
fixed ones, LSB 1 and LSB 2 with learned parameters): fed the compiled CPU kernel's uniforms
they choose the same sites, make the same decisions and leave the same chains, step by step,
renormalisation included; their chains reach the exact posterior of a 3x3 lattice."""

from __future__ import annotations

import pytest
import torch
from device_mode import DEVICE, ON_GPU, cpu_uniforms  # before Triton: the interpreter's switch

pytest.importorskip("triton")

from lsbcore import IsingPosterior, PairwiseMRF, make_sampler  # noqa: E402
from lsbcore.backends.device import balanced  # noqa: E402

FIXED = ["barker", "sqrt", "min", "max"]
LEARNED = ["lsb1", "lsb2"]


def random_network(n: int = 12, seed: int = 3) -> PairwiseMRF:
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(n, n, generator=generator, dtype=torch.float64) * 0.5
    upper = torch.triu(weights * (torch.rand(n, n, generator=generator) < 0.4), 1)
    return PairwiseMRF(torch.randn(n, generator=generator, dtype=torch.float64), upper + upper.T)


def lattice(shape, boundary: str, scale: float = 1.0, seed: int = 0) -> IsingPosterior:
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.randn(*shape, generator=generator, dtype=torch.float64) * scale
    return IsingPosterior(alpha, 0.5, boundary)


TARGETS = {
    "3x3-free": lambda: lattice((3, 3), "free"),
    "4x5-periodic": lambda: lattice((4, 5), "periodic"),
    "network": random_network,
}


@pytest.fixture
def wide_programs(monkeypatch):
    """Several chains per program: the interpreter pays per operation, not per lane. One test
    keeps CUDA's layout (one chain per program)."""
    monkeypatch.setattr(balanced, "CHAINS_PER_PROGRAM", 4)


def learned_parameters(sampler) -> None:
    """Parameters as after learning, not the start's: unequal mixture weights (LSB 1), a
    network far from sqrt with several breakpoints inside its input range (LSB 2); the same
    for every sampler. The g-cache is rebuilt for them."""
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in sampler.balancing.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64).mul_(2.0))
    sampler.resync()


def pair(name, target, n_chains=3, **options):
    """The same sampler on the compiled kernel (CPU) and on the device kernel."""
    compiled = make_sampler(name, target, n_chains, seed=5, backend="compiled", **options)
    device = make_sampler(
        name, target, n_chains, seed=5, backend="device", device=DEVICE, **options
    )
    cpu_uniforms(device, twin=compiled)
    for sampler in (compiled, device):
        if name in LEARNED:
            learned_parameters(sampler)
        sampler.track_statistics(torch.ones(target.shape))
    assert device._uses_device()
    return compiled, device


def test_the_learned_functions_are_not_the_start():
    """LSB 1's weights are unequal and LSB 2 reaches several of its pieces: the comparisons
    below exercise the mixture and the piece search."""
    lsb1, _ = pair("lsb1", TARGETS["3x3-free"]())
    assert lsb1.balancing.weights().std() > 0.1
    lsb2, _ = pair("lsb2", TARGETS["3x3-free"]())
    assert len(lsb2.balancing.pieces()[0]) >= 2


def assert_same_chains(compiled, device) -> None:
    """Sites, decisions, states and log-ratios bitwise (on CUDA the exact resync of the
    log-ratios runs torch's CUDA operations: within rounding there); the g-cache within
    rounding (exp and log come from another library)."""
    assert torch.equal(compiled._x, device._x.cpu())
    if ON_GPU:
        torch.testing.assert_close(device._s.cpu(), compiled._s, rtol=1e-12, atol=1e-12)
    else:
        assert torch.equal(compiled._s, device._s)
    assert compiled.n_accepted == device.n_accepted
    ours = {k: v.cpu() for k, v in device.last_proposal.items()}
    theirs = compiled.last_proposal
    assert torch.equal(ours["site"], theirs["site"])
    assert torch.equal(ours["accepted"], theirs["accepted"])
    torch.testing.assert_close(ours["accept_prob"], theirs["accept_prob"], rtol=1e-12, atol=0)
    torch.testing.assert_close(device._shift.cpu(), compiled._shift, rtol=1e-12, atol=1e-12)
    for cached in ("_gn", "_block_sum", "_Z"):
        torch.testing.assert_close(
            getattr(device, cached).cpu(), getattr(compiled, cached), rtol=1e-12, atol=0
        )
    stats = device.statistics.cpu()
    torch.testing.assert_close(stats, compiled.statistics, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("target_name", TARGETS)
@pytest.mark.parametrize("name", FIXED + LEARNED)
def test_device_steps_are_the_compiled_steps_step_by_step(name, target_name, wide_programs):
    compiled, device = pair(name, TARGETS[target_name](), resync_every=17)
    for m in (1, 1, 2, 9, 1, 14):  # chunks of several steps, across a resync
        traces = [torch.zeros(m, 3, 5, dtype=torch.float64) for _ in range(2)]
        compiled.step(m, trace=traces[0])
        device.step(m, trace=traces[1])
        assert torch.equal(traces[0][:, :, 3:], traces[1][:, :, 3:])  # decisions, sites
        torch.testing.assert_close(traces[1], traces[0], rtol=1e-12, atol=1e-12)
        assert_same_chains(compiled, device)
    assert device.invariant_error() < 1e-12


def test_one_program_per_chain_gives_the_same_chains():
    """CUDA's layout (one chain per program) and the tests' wide programs run the same rule."""
    compiled, device = pair("barker", TARGETS["4x5-periodic"](), n_chains=2)
    for m in (1, 6):
        compiled.step(m)
        device.step(m)
        assert_same_chains(compiled, device)


@pytest.mark.parametrize("name", ["max", "sqrt", *LEARNED])
def test_renormalisation_when_z_leaves_its_range_is_the_compiled_one(name, wide_programs):
    """A strong field puts log-ratios near +-300: a flip moves Z by e^300 or so, out of
    [e^-200, e^200], and the row is rebuilt with a fresh shift, at the same steps as on the CPU."""
    target = lattice((4, 5), "free", scale=150.0, seed=1)
    compiled, device = pair(name, target, n_chains=4, resync_every=10**6)
    shifts = [device._shift.clone()]
    for _ in range(10):
        compiled.step(1)
        device.step(1)
        assert_same_chains(compiled, device)
        shifts.append(device._shift.clone())
    moved = [not torch.equal(a.cpu(), b.cpu()) for a, b in zip(shifts, shifts[1:], strict=False)]
    assert any(moved)  # rows were rebuilt (no resync in between)


def test_the_comparison_sees_a_single_changed_decision_uniform(wide_programs, monkeypatch):
    """The step-by-step check is not vacuous: one decision uniform moved across its chain's
    acceptance probability in the first step gives another chain than the CPU kernel's."""
    compiled, device = pair("barker", TARGETS["4x5-periodic"](), n_chains=6)
    compiled.step(1)
    last = compiled.last_proposal
    undecided = ((last["accept_prob"] > 0.01) & (last["accept_prob"] < 0.99)).nonzero()
    assert len(undecided), "no chain with 0 < A < 1 in the first step: choose another seed"
    b = int(undecided[0])
    a = float(last["accept_prob"][b])
    moved = (a + 1) / 2 if bool(last["accepted"][b]) else a / 2  # the other decision
    draw = device._draw_uniforms

    def perturbed(m, width):
        u = draw(m, width)
        u[0, b, 2] = moved
        return u

    monkeypatch.setattr(device, "_draw_uniforms", perturbed)
    device.step(1)
    assert bool(device.last_proposal["accepted"][b]) != bool(last["accepted"][b])
    x = device._x.cpu()
    assert not torch.equal(x[b], compiled._x[b])
    others = torch.arange(6) != b
    assert torch.equal(x[others], compiled._x[others])


@pytest.mark.parametrize("name", ["sqrt", "min", *LEARNED])
def test_device_locally_balanced_matches_the_exact_posterior(name, exact, monkeypatch):
    """Many chains of a 3x3 lattice: within the Monte Carlo threshold of the enumerated
    posterior. The interpreter pays per step, not per chain: many chains, each giving a few
    draws far apart (a chain's nearby draws are correlated, which the threshold ignores).
    In the interpreter every chain in one program; on a GPU one program a chain, as the
    library runs (a 2,048-lane program is minutes of ptxas there, for nothing)."""
    if not ON_GPU:
        monkeypatch.setattr(balanced, "CHAINS_PER_PROGRAM", 2048)
    target = IsingPosterior(exact.random_alpha((3, 3), scale=0.6, seed=2), 0.5, "periodic")
    sampler = make_sampler(name, target, 2048, seed=3, backend="device", device=DEVICE)
    if name in LEARNED:
        learned_parameters(sampler)
    assert sampler._uses_device()
    counts = exact.histogram(sampler, burn_in=40, thin=20, draws=3)
    p = exact.exact_posterior(target)
    assert exact.tv(p, counts) < exact.tv_threshold(p, int(counts.sum()))


@pytest.mark.skipif(ON_GPU, reason="the twin learns on the CPU: CUDA's rounding differs")
@pytest.mark.parametrize("name", LEARNED)
def test_frozen_device_steps_follow_the_learned_function(name, wide_programs):
    """The device's copy of g is built once per learned function: learning between frozen
    chunks, by either rule (compiled: writes through ``.data``; torch: fused Adam), neither of
    which bumps the parameters' versions, gives the next chunk the new function."""
    compiled, device = pair(name, TARGETS["4x5-periodic"]())
    for learning in ("compiled", "torch"):
        for sampler in (compiled, device):
            sampler.step(2)  # frozen, on its own backend: the device copies g
        for sampler, own in ((compiled, "compiled"), (device, "device")):
            sampler.set_backend(learning)
            sampler.step(3, learn=True)
            sampler.set_backend(own)
        for sampler in (compiled, device):
            sampler.step(4)
        assert_same_chains(compiled, device)
