"""The compiled CPU path (``lsbcore.backends.kernels``): same functions, same statistics, same
bookkeeping as the torch path. Its exactness is checked with the torch path's in
test_exactness.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, PairwiseMRF, make_sampler, paper_case
from lsbcore.backends import kernels
from lsbcore.balancing.functions import MixtureBalancing
from lsbcore.samplers import warmup

LOCALLY_BALANCED = ["barker", "sqrt", "min", "max", "lsb1", "lsb2"]
ALL = LOCALLY_BALANCED + ["gibbs", "metropolis"]


def kernel_log_g(sampler, s: np.ndarray) -> np.ndarray:
    kind, log_w, bp, slope, icpt = sampler._kernel_function()
    return np.array([kernels.log_g(kind, v, log_w, bp, slope, icpt) for v in s])


@pytest.mark.parametrize("name", LOCALLY_BALANCED)
def test_kernel_log_g_equals_the_balancing_function(name):
    case = paper_case(3, n_chains=2)
    sampler = make_sampler(name, case.target, 2, x0=case.x0)
    if name == "lsb1":  # unequal weights, so a wrong component order would show
        sampler.balancing.theta.data = torch.tensor([0.3, -1.2, 2.0, -0.4], dtype=torch.float64)
    s = np.concatenate([np.linspace(-40, 40, 801), [-700.0, 700.0, 0.0]])
    expected = sampler.balancing.log_g(torch.from_numpy(s)).detach().numpy()
    np.testing.assert_allclose(kernel_log_g(sampler, s), expected, rtol=1e-12, atol=1e-12)


def test_kernel_mixture_with_one_hot_weights_is_the_fixed_function():
    case = paper_case(3, n_chains=2)
    mixture = MixtureBalancing(torch.tensor([-1e9, 50.0, -1e9, -1e9])).frozen()
    sampler = make_sampler("learned", case.target, 2, x0=case.x0, balancing=mixture)
    s = np.linspace(-20, 20, 81)
    np.testing.assert_allclose(kernel_log_g(sampler, s), 0.5 * s, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_trace_holds_the_statistics_after_every_step(name):
    """``step(n, trace=...)`` equals stepping one at a time and recomputing the statistics from
    ``x`` (the compiled path draws its uniforms as one stream, so the chains are the same)."""
    case = paper_case(1, n_chains=3)
    truth = torch.as_tensor(case.truth, dtype=torch.float64).reshape(-1)
    n = 20
    sampler = make_sampler(name, case.target, 3, x0=case.x0, resync_every=7)
    sampler.track_statistics(case.truth)
    trace = torch.zeros(n, 3, 5, dtype=torch.float64)
    sampler.step(n, trace=trace)
    single = make_sampler(name, case.target, 3, x0=case.x0, resync_every=7)
    for t in range(n):
        before = single.x.clone()
        single.step(1)
        x = single.x.reshape(3, -1)
        expected = torch.stack([case.target.log_prob(single.x), x.sum(1), x @ truth], 1)
        torch.testing.assert_close(trace[t, :, :3], expected, rtol=0, atol=1e-9)
        changed = (single.x != before).reshape(3, -1)
        assert torch.equal(trace[t, :, 3], changed.any(1).double())
        assert torch.equal(trace[t, :, 4].long(), single.last_proposal["site"])
        for b in range(3):  # an accepted step flipped exactly the proposed site
            if changed[b].any():
                assert changed[b].nonzero().view(-1).tolist() == [int(trace[t, b, 4])]
    assert torch.equal(sampler.x, single.x)
    assert float(trace[:, :, 3].sum()) == pytest.approx(sampler.accept_rate * n * 3)


def random_network():
    generator = torch.Generator().manual_seed(3)
    weights = torch.randn(12, 12, generator=generator, dtype=torch.float64) * 0.5
    upper = torch.triu(weights * (torch.rand(12, 12, generator=generator) < 0.4), 1)
    return PairwiseMRF(torch.randn(12, generator=generator, dtype=torch.float64), upper + upper.T)


@pytest.mark.parametrize("target_kind", ["lattice", "network"])
@pytest.mark.parametrize("name", [*ALL, "checkerboard"])
def test_both_paths_keep_the_same_bookkeeping(name, target_kind):
    """Counters, statistics and the last proposal agree between the two backends, and so do
    the chains, learning steps included: both draw the same uniforms and read them alike."""
    if target_kind == "lattice":
        target = IsingPosterior(torch.randn(4, 5, dtype=torch.float64), 0.4, "free")
    else:
        target = random_network()
    out = {}
    for compiled in (True, False):
        backend = "compiled" if compiled else "torch"
        sampler = make_sampler(name, target, 5, seed=1, resync_every=9, backend=backend)
        sampler.track_statistics()
        if sampler.learnable:
            sampler.step(20, learn=True)
        sampler.step(25)
        x = sampler.x.reshape(5, -1)
        torch.testing.assert_close(sampler.statistics[:, 0], target.log_prob(sampler.x))
        torch.testing.assert_close(sampler.statistics[:, 1], x.sum(1))
        assert sampler.invariant_error() < 1e-12
        out[compiled] = (sampler.n_steps, sampler.n_target_evals, sampler.x.clone())
        if sampler.sites_per_step > 1:  # a sweep proposes no single site
            continue
        last = sampler.last_proposal
        assert set(last) == {"site", "accept_prob", "accepted"}
        assert last["site"].dtype == torch.long and last["accepted"].dtype == torch.bool
        assert bool(((last["accept_prob"] >= 0) & (last["accept_prob"] <= 1)).all())
    assert out[True][:2] == out[False][:2]
    assert torch.equal(out[True][2], out[False][2])


def test_the_backend_argument_chooses_the_path(monkeypatch):
    case = paper_case(3, n_chains=2)
    calls = []
    sampler = make_sampler("barker", case.target, 2, x0=case.x0)
    assert sampler.backend == "compiled"  # "auto" on the CPU with numba installed
    original = type(sampler)._compiled_steps
    monkeypatch.setattr(
        type(sampler), "_compiled_steps", lambda self, *a: calls.append(1) or original(self, *a)
    )
    sampler.step(5)
    assert calls and warmup.ready()
    calls.clear()
    make_sampler("barker", case.target, 2, x0=case.x0, backend="torch").step(5)
    assert not calls
    lsb = make_sampler("lsb1", case.target, 2, x0=case.x0)
    monkeypatch.setattr(
        type(lsb), "_compiled_steps", lambda self, *a: calls.append(1) or original(self, *a)
    )
    lsb.step(3, learn=True)  # learning steps take the learning kernels, not the frozen ones
    assert not calls
    with pytest.raises(ValueError, match="backend must be one of"):
        make_sampler("barker", case.target, 2, backend="gpu")
    with pytest.raises(ValueError, match="runs on the CPU only"):
        from lsbcore.backends import resolve_backend

        resolve_backend("compiled", torch.device("cuda"))


def test_compile_is_idempotent_and_reports_ready():
    warmup.compile_kernels()
    warmup.compile_kernels()
    assert warmup.ready()


def test_lsb2_kernel_uses_the_current_network():
    """After learning, the kernel must read the updated pieces, not a stale copy."""
    case = paper_case(3, n_chains=4)
    sampler = make_sampler("lsb2", case.target, 4, x0=case.x0)
    before = kernel_log_g(sampler, np.array([-3.0, 1.0]))
    sampler.step(30, learn=True)
    after = kernel_log_g(sampler, np.array([-3.0, 1.0]))
    expected = sampler.balancing.log_g(torch.tensor([-3.0, 1.0], dtype=torch.float64))
    np.testing.assert_allclose(after, expected.detach().numpy(), rtol=1e-12)
    assert not np.allclose(before, after)


# ----------------------------------------------------------------------------- learning
@pytest.mark.parametrize(
    ("optimizer", "objective"), [("adam", "exact"), ("sgd", "exact"), ("adam", "authors")]
)
@pytest.mark.parametrize("name", ["lsb1", "lsb2"])
def test_compiled_learning_is_the_torch_learning_step(name, optimizer, objective):
    """From one seed, the compiled learning steps make the same moves and reach the same
    parameters, losses and counts as the torch step (itself tied to an autograd reference in
    test_learning.py), with either form of the objective's log p~."""
    case = paper_case(3, n_chains=6)
    compiled, reference = (
        make_sampler(
            name,
            case.target,
            6,
            seed=4,
            x0=case.x0,
            optimizer=optimizer,
            objective=objective,
            backend=backend,
        )
        for backend in ("compiled", "torch")
    )
    for m in (1, 5, 40):
        compiled.step(m, learn=True)
        reference.step(m, learn=True)
        assert torch.equal(compiled.x, reference.x)
        pairs = zip(compiled.balancing.parameters(), reference.balancing.parameters(), strict=True)
        for a, b in pairs:
            torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-12)
        torch.testing.assert_close(compiled.eta_raw, reference.eta_raw, rtol=1e-11, atol=1e-12)
        assert compiled.n_steps == reference.n_steps
        assert compiled.n_target_evals == reference.n_target_evals
        assert compiled.accept_rate == reference.accept_rate
    ours, theirs = compiled.history.arrays(), reference.history.arrays()
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours["eta"], theirs["eta"], rtol=1e-10)
    np.testing.assert_allclose(ours["weights"], theirs["weights"], rtol=1e-10, atol=1e-14)
    # after learning the frozen compiled steps use the learned function: exact caches
    compiled.step(50)
    assert compiled.invariant_error() < 1e-12


@pytest.mark.parametrize("boundary", ["free", "periodic"])
def test_lsb2_learning_in_chain_groups_gives_the_torch_steps_run(boundary, monkeypatch):
    """LSB 2's learning step on a lattice runs each chain's O(D) part (``Z``, its gradient
    sums, the draw) in its chain group (the parallel twin), then the loss and update over all
    chains: the torch step's chains, parameters, losses and trace with three groups of unequal
    sizes, and bit for bit one group's, on a lattice of five tiles."""
    from lsbcore.backends import learning_kernels, threads

    if not threads.parallel_ready():
        pytest.skip("no thread-safe numba threading layer (OpenMP or TBB) on this machine")
    field = torch.randn(66, 66, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    target = IsingPosterior(field, 0.6, boundary)
    assert target.n_sites > learning_kernels.LATTICE_TILE
    monkeypatch.setattr(threads, "cores", lambda: 3)
    calls = []
    twin = learning_kernels.network_learning_step_parallel
    monkeypatch.setattr(
        learning_kernels, "network_learning_step_parallel",
        lambda *args: calls.append(args[-1]) or twin(*args),
    )  # fmt: skip
    runs, traces = {}, {}
    for key, backend, work in [("groups", "compiled", 1), ("one", "compiled", 10**12),
                               ("torch", "torch", 1)]:  # fmt: skip
        monkeypatch.setattr(threads, "MIN_LEARNING_WORK", work)
        sampler = make_sampler("lsb2", target, 7, seed=2, lr=0.05, backend=backend)
        sampler.track_statistics()
        traces[key] = torch.zeros(60, 7, 5, dtype=torch.float64)
        sampler.step(60, learn=True, trace=traces[key])
        runs[key] = sampler
    assert calls and set(calls) == {3}  # the twin took every step of the grouped run, and only it
    grouped, one, reference = runs["groups"], runs["one"], runs["torch"]
    assert torch.equal(grouped.x, one.x) and torch.equal(grouped.x, reference.x)
    assert torch.equal(traces["groups"], traces["one"])
    torch.testing.assert_close(traces["groups"], traces["torch"], rtol=0, atol=1e-9)
    for a, b, c in zip(*(r.balancing.parameters() for r in runs.values()), strict=True):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-12)
    losses = [r.history.arrays()["loss"] for r in runs.values()]
    np.testing.assert_array_equal(losses[0], losses[1])
    np.testing.assert_allclose(losses[0], losses[2], rtol=1e-9, atol=1e-12)


def test_lsb2_learning_on_a_lattice_runs_in_groups_where_the_timings_say_they_pay(monkeypatch):
    """Two groups on two cores from 2 chains of a 64 x 64 lattice up (BENCHMARKS.md: 1.54-1.93x);
    never on the paper cases' 30 x 30, where the page's burn-in with the browser on the same
    cores was slower in groups; one chain, or no thread-safe layer, never."""
    from lsbcore.backends import threads

    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)

    def groups(side, chains):
        target = IsingPosterior(torch.zeros(side, side, dtype=torch.float64), 0.5)
        return threads.learning_groups(chains, make_sampler("lsb2", target, chains).learning_work())

    assert [groups(30, b) for b in (1, 2, 4, 30)] == [1, 1, 1, 1]
    assert [groups(64, b) for b in (1, 2, 4)] == [1, 2, 2]
    assert [groups(256, b) for b in (1, 2, 8)] == [1, 2, 2]
    monkeypatch.setattr(threads, "parallel_ready", lambda: False)
    assert groups(256, 8) == 1


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("name", ["lsb1", "lsb2"])
def test_a_change_of_backend_mid_burn_in_keeps_the_optimisers_state(name, optimizer):
    """The app steps with torch until the compiled kernels are ready and then takes them, in
    the middle of a burn-in: the optimiser's moments (Adam) or momentum (SGD) pass between
    ``torch.optim`` and the kernels, so the run is the one a single backend gives."""
    case = paper_case(3, n_chains=4)

    def learner(backend):
        return make_sampler(name, case.target, 4, seed=4, x0=case.x0, optimizer=optimizer,
                            backend=backend)  # fmt: skip

    one = learner("torch")
    one.step(40, learn=True)
    switched = learner("torch")
    for steps, backend in zip([7, 11, 9, 13], ["torch", "compiled"] * 2, strict=True):
        switched.set_backend(backend)
        switched.step(steps, learn=True)
    assert torch.equal(switched.x, one.x)
    for a, b in zip(switched.balancing.parameters(), one.balancing.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    ours, theirs = switched.history.arrays(), one.history.arrays()
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["lsb1", "lsb2"])
def test_compiled_learning_stops_on_a_non_finite_loss(name):
    """A NaN log p~ makes the loss NaN: the step restores the parameters it started from,
    warns, and the sampler goes on with frozen steps."""
    case = paper_case(3, n_chains=4)
    sampler = make_sampler(name, case.target, 4, x0=case.x0)
    sampler.step(5, learn=True)
    good = [p.detach().clone() for p in sampler._learned_params()]
    sampler._log_p_learning = torch.full((4,), float("nan"), dtype=torch.float64)
    sampler._log_p_step = sampler.n_steps
    with pytest.warns(RuntimeWarning, match="stops learning"):
        sampler.step(10, learn=True)
    assert sampler.learning_failed and sampler.n_steps == 15
    for a, b in zip(sampler._learned_params(), good, strict=True):
        assert torch.equal(a.detach(), b)
    assert sampler.invariant_error() < 1e-12


@pytest.mark.parametrize("name", ["lsb1", "lsb2"])
def test_trace_of_learning_steps(name):
    case = paper_case(1, n_chains=3)
    sampler = make_sampler(name, case.target, 3, x0=case.x0, resync_every=7)
    sampler.track_statistics(case.truth)
    trace = torch.zeros(12, 3, 5, dtype=torch.float64)
    sampler.step(12, learn=True, trace=trace)
    x = sampler.x.reshape(3, -1)
    truth = torch.as_tensor(case.truth, dtype=torch.float64).reshape(-1)
    final = torch.stack([case.target.log_prob(sampler.x), x.sum(1), x @ truth], 1)
    torch.testing.assert_close(trace[-1, :, :3], final, rtol=0, atol=1e-9)
    assert float(trace[:, :, 3].sum()) == pytest.approx(sampler.accept_rate * 36)


def test_checkerboard_sweeps_in_chain_groups_are_the_chains_of_one_call(monkeypatch):
    """On a large lattice the compiled sweep runs groups of chains in parallel threads: the
    chains, statistics and counts equal the torch backend's (one batch, no threads)."""
    from lsbcore.backends import threads

    monkeypatch.setattr(threads, "cores", lambda: 2)
    alpha = torch.randn(128, 128, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    target = IsingPosterior(alpha, 0.8, "free")
    assert len(threads.chain_groups(4, target.n_sites)) == 2
    runs = []
    for backend in ("compiled", "torch"):
        sampler = make_sampler("checkerboard", target, 4, seed=3, backend=backend)
        sampler.track_statistics()
        trace = torch.zeros(6, 4, 5, dtype=torch.float64)
        sampler.step(6, trace=trace)
        runs.append((sampler.x.clone(), sampler.statistics.clone(), sampler.n_accepted, trace))
    (x1, stats1, n1, trace1), (x2, stats2, n2, trace2) = runs
    assert torch.equal(x1, x2) and n1 == n2
    torch.testing.assert_close(stats1, stats2, rtol=1e-12, atol=1e-8)
    assert torch.equal(trace1[:, :, 3:], trace2[:, :, 3:])  # sites flipped, site -1
