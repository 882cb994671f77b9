"""The learning steps of LSB 1 and LSB 2 run compiled on an RBM (issue 45 item 3), with exact
ratios (``lsb1``, ``lsb2``) and with gradient-approximated ones (``flsb1``, ``flsb2``): from the
same uniforms they give the torch learning step's chains, parameters, losses and caches, with
Adam and with SGD, on both forms of the exact products (each chain's shift-factor table, or
factors selected by the state), through resyncs, restarts, backend switches and a divergence;
``auto`` takes them (also where it takes torch's frozen steps), and an RBM whose ratios exceed
the kernels' range learns on torch steps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore.backends import learned_function, rbm_learning_kernels, vector_math
from lsbcore.balancing.functions import NetworkBalancing
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.rbm import RBM

pytestmark = pytest.mark.usefixtures("single_thread")

ALL = ("lsb1", "flsb1", "lsb2", "flsb2")


def bounded():
    """Ratios bounded well inside the kernel's range."""
    return RBM.random(14, 6, seed=4, scale=0.8)


def learner(target, backend, name="lsb1", n_chains=6, seed=5, **options):
    """A learnable sampler on ``backend`` (which it must take)."""
    sampler = make_sampler(name, target, n_chains, seed=seed, backend=backend, **options)
    assert sampler.backend == backend
    return sampler


def assert_same_run(compiled, torch_run, exact_chains=True):
    """The two samplers are where the other is: chains, counts, parameters, history, caches."""
    if exact_chains:
        assert torch.equal(compiled.x, torch_run.x)
        assert torch.equal(compiled._n_accepted, torch_run._n_accepted)
    torch.testing.assert_close(
        compiled._parameter_vector(), torch_run._parameter_vector(), rtol=1e-9, atol=1e-12
    )
    torch.testing.assert_close(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    if compiled.ratios == "exact":
        torch.testing.assert_close(compiled._s, torch_run._s, rtol=1e-10, atol=1e-9)
        torch.testing.assert_close(compiled._cache, torch_run._cache, rtol=1e-12, atol=1e-12)
    else:
        torch.testing.assert_close(compiled._s_tilde, torch_run._s_tilde, rtol=1e-10, atol=1e-9)
    rows, rows_t = compiled.history._rows, torch_run.history._rows
    assert len(rows) == len(rows_t) > 0
    for row, row_t in zip(rows, rows_t, strict=True):
        assert row[0] == row_t[0]  # the step
        values = [row[1], row[2], *row[3]]  # loss, eta, the four weights
        np.testing.assert_allclose(values, [row_t[1], row_t[2], *row_t[3]], rtol=1e-8, atol=1e-12)
    info, info_t = compiled.step_info, torch_run.step_info
    assert torch.equal(info.site, info_t.site)
    assert torch.equal(info.accepted, info_t.accepted)
    torch.testing.assert_close(info.accept_prob, info_t.accept_prob, rtol=1e-9, atol=1e-12)
    assert compiled.n_target_evals == torch_run.n_target_evals
    assert compiled.n_steps == torch_run.n_steps
    assert compiled.invariant_error() < 1e-9


@pytest.mark.parametrize(
    "name, tabled",
    [("lsb1", True), ("lsb1", False), ("lsb2", True), ("lsb2", False), ("flsb1", None),
     ("flsb2", None)],
    ids=["lsb1, tables", "lsb1, selected factors", "lsb2, tables", "lsb2, selected factors",
         "flsb1", "flsb2"],
)  # fmt: skip
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_compiled_learning_gives_the_torch_steps_chains_parameters_and_losses(
    name, tabled, optimizer, monkeypatch
):
    if tabled is False:
        monkeypatch.setattr(rbm_learning_kernels, "TABLE_LIMIT", 0)
    target = bounded()
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name, optimizer=optimizer, lr=0.05, resync_every=70)
        sampler.step(150, learn=True)  # resyncs inside
        runs[backend] = sampler
    compiled, torch_run = runs["compiled"], runs["torch"]
    assert compiled.learns_compiled() and not torch_run.learns_compiled()
    assert_same_run(compiled, torch_run)
    # it learned: the parameters moved well away from their start
    start = learner(target, "torch", name)._parameter_vector()
    assert float((compiled._parameter_vector() - start).abs().max()) > 0.1
    assert 0 < int(compiled._n_accepted.sum()) < 150 * compiled.n_chains
    # and the frozen steps after it agree as well
    for sampler in runs.values():
        sampler.balancing.frozen()
        sampler.step(100)
    assert torch.equal(compiled.x, torch_run.x)


@pytest.mark.parametrize(
    "name, tabled",
    [("lsb1", True), ("lsb1", False), ("lsb2", True), ("flsb1", None), ("flsb2", None)],
)  # fmt: skip
def test_chain_groups_on_all_cores_give_the_torch_steps_run(name, tabled, monkeypatch):
    """The parallel twin runs a step's chains in groups side by side, then the loss and update
    over all of them in the chains' order: the torch step's chains, parameters, losses and
    trace, with groups of unequal sizes."""
    from lsbcore.backends import threads

    if not threads.parallel_ready():
        pytest.skip("no thread-safe numba threading layer (OpenMP or TBB) on this machine")
    if tabled is False:
        monkeypatch.setattr(rbm_learning_kernels, "TABLE_LIMIT", 0)
    monkeypatch.setattr(threads, "cores", lambda: 3)
    monkeypatch.setattr(threads, "MIN_LEARNING_WORK", 1)
    assert threads.learning_groups(7, 1) == 3
    target = bounded()
    runs, traces = {}, {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name, n_chains=7, lr=0.05, resync_every=70)
        sampler.track_statistics()
        traces[backend] = torch.zeros(90, 7, 5, dtype=torch.float64)
        sampler.step(90, learn=True, trace=traces[backend])
        runs[backend] = sampler
    assert_same_run(runs["compiled"], runs["torch"])
    torch.testing.assert_close(traces["compiled"], traces["torch"], rtol=0, atol=1e-9)


def test_learning_runs_in_groups_only_where_a_step_pays_for_the_threads(monkeypatch):
    """Two groups from a serial step of about 35 us (the live page, BENCHMARKS.md): the 16 x 16
    digits page's 8 chains, the 100 x 25 RBM's 100, not the 8 x 8 page's 8 chains; one chain,
    or no thread-safe layer, never."""
    from lsbcore.backends import threads
    from lsbcore.rbm.models import load_model

    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)
    models = {
        "8 x 8": load_model("digits-8x8"), "16 x 16": load_model("digits-16x16"),
        "100 x 25": RBM.random(100, 25), "20 x 10": RBM.random(20, 10),
    }  # fmt: skip
    groups = {
        (key, b): threads.learning_groups(b, make_sampler("lsb1", rbm, b).learning_work())
        for key, rbm in models.items() for b in (1, 2, 4, 8)
    }  # fmt: skip
    assert groups == {
        ("8 x 8", 1): 1, ("8 x 8", 2): 1, ("8 x 8", 4): 1, ("8 x 8", 8): 1,
        ("16 x 16", 1): 1, ("16 x 16", 2): 1, ("16 x 16", 4): 1, ("16 x 16", 8): 2,
        ("100 x 25", 1): 1, ("100 x 25", 2): 1, ("100 x 25", 4): 1, ("100 x 25", 8): 1,
        ("20 x 10", 1): 1, ("20 x 10", 2): 1, ("20 x 10", 4): 1, ("20 x 10", 8): 1,
    }  # fmt: skip
    assert threads.learning_groups(100, 2 * 100 * 25) == 2  # the 100 x 25 RBM's 100 chains
    monkeypatch.setattr(threads, "parallel_ready", lambda: False)
    assert threads.learning_groups(100, 2 * 100 * 25) == 1


def test_forced_groups_hold_in_their_thread_only_and_end_with_it(monkeypatch):
    """The warm-up's way to reach the parallel twins on a tiny target: two groups whatever the
    work, at most one a chain, none without a thread-safe layer, and only in its thread."""
    import threading

    from lsbcore.backends import threads

    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)
    seen = []
    with threads.forced_groups(2):
        assert threads.learning_groups(2, 1) == 2
        assert threads.learning_groups(1, 1) == 1
        other = threading.Thread(target=lambda: seen.append(threads.learning_groups(2, 1)))
        other.start()
        other.join()
        monkeypatch.setattr(threads, "parallel_ready", lambda: False)
        assert threads.learning_groups(2, 1) == 1
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)
    assert seen == [1]
    assert threads.learning_groups(2, 1) == 1


def test_learning_in_chain_groups_leaves_the_threads_torch_count_alone():
    """numba's OpenMP layer shares the OpenMP runtime with torch and left the launching thread's
    torch threads at all the cores (seen in the samplers benchmark): after each twin's steps
    (LSB 2 on a lattice, LSB 1 and FLSB 1 on an RBM, LSB 1 on a factor graph) they are what the
    caller set. In a fresh process, as the app's session threads start."""
    import subprocess
    import sys

    code = """if True:
        import torch
        torch.set_num_threads(1)
        torch.get_num_threads()
        from lsbcore.backends import threads
        from lsbcore.samplers.registry import make_sampler
        from lsbcore.targets.grid_network import grid_network
        from lsbcore.targets.ising import IsingPosterior
        from lsbcore.targets.rbm import RBM
        runs = [("lsb2", IsingPosterior(torch.linspace(-1, 1, 9).view(3, 3), 0.5)),
                ("lsb1", RBM.random(6, 3)), ("flsb1", RBM.random(6, 3)),
                ("lsb1", grid_network(3, 0.5, 0))]
        counts = [threads.parallel_ready()]
        with threads.forced_groups(2):
            for name, target in runs:
                make_sampler(name, target, 2, backend="compiled").step(3, learn=True)
                counts.append(torch.get_num_threads())
        print(*counts)
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ready, *counts = done.stdout.split()
    if ready == "False":
        pytest.skip("no thread-safe numba threading layer (OpenMP or TBB) on this machine")
    assert counts == ["1"] * 4


@pytest.mark.parametrize("name", ALL)
def test_restarts_inside_a_call_give_the_torch_chains(name):
    """The paper's Q1 restarts (here frequent) cut the compiled call where the torch loop
    restarts chains, from the same generator."""
    target = bounded()
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name, restart_prob=0.02, seed=11)
        sampler.step(120, learn=True)
        runs[backend] = sampler
    assert_same_run(runs["compiled"], runs["torch"])


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_short_calls_and_torch_learning_steps_among_them_give_one_long_calls_run(name, optimizer):
    """The optimiser's state passes between the kernel and ``torch.optim`` when the backend
    changes mid-burn-in: one run, whatever the calls and backends."""
    target = bounded()
    long = learner(target, "compiled", name, optimizer=optimizer)
    long.step(60, learn=True)
    short = learner(target, "compiled", name, optimizer=optimizer)
    backends = ["compiled", "torch", "compiled", "torch", "compiled"]
    for steps, backend in zip([12, 7, 20, 9, 12], backends, strict=True):
        short.set_backend(backend)
        short.step(steps, learn=True)
    short.set_backend("compiled")
    assert_same_run(short, long)


@pytest.mark.parametrize("name", ALL)
def test_a_step_trace_of_learning_steps_is_the_torch_steps_trace(name):
    target = bounded()
    traces = {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name)
        sampler.track_statistics()
        trace = torch.zeros(40, sampler.n_chains, 5, dtype=torch.float64)
        sampler.step(40, learn=True, trace=trace)
        traces[backend] = trace
    torch.testing.assert_close(traces["compiled"], traces["torch"], rtol=0, atol=1e-9)
    assert float(traces["compiled"][:, :, 3].sum()) > 0  # moves were recorded


@pytest.mark.parametrize("name", ALL)
def test_a_non_finite_loss_stops_compiled_learning_as_the_torch_step_does(name):
    """A NaN log p~ makes the loss NaN: the parameters stay the last good ones, the history
    stops, the sampler warns and goes on with frozen (compiled) steps; the torch run does the
    same, step for step."""
    target = bounded()
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name)
        sampler.step(10, learn=True)
        good = sampler._parameter_vector().clone()
        recorded = len(sampler.history)
        sampler._log_p = sampler._log_p.clone()
        sampler._log_p[2] = math.nan
        with pytest.warns(RuntimeWarning, match="stops learning and keeps its last good"):
            sampler.step(8, learn=True)
        assert sampler.learning_failed
        torch.testing.assert_close(sampler._parameter_vector(), good, rtol=0, atol=0)
        assert len(sampler.history) == recorded
        sampler.step(20, learn=True)  # frozen steps from now on
        torch.testing.assert_close(sampler._parameter_vector(), good, rtol=0, atol=0)
        runs[backend] = sampler
    # the chains agree but for the corrupted one, which FLSB's torch step no longer moves (its
    # log p~ ratio is a difference of evaluations, NaN) and the kernel moves (a ratio of products)
    kept = [b for b in range(runs["torch"].n_chains) if b != 2]
    assert torch.equal(runs["compiled"].x[kept], runs["torch"].x[kept])
    assert runs["compiled"].n_steps == runs["torch"].n_steps == 38


@pytest.mark.parametrize("name", ALL)
def test_auto_learns_compiled_and_a_model_beyond_the_kernels_range_learns_on_torch(name):
    sampler = make_sampler(name, bounded(), 4, seed=0)
    assert sampler.backend == "compiled" and sampler.learns_compiled()
    assert not make_sampler(name, bounded(), 4, seed=0, backend="torch").learns_compiled()
    wide = RBM.random(10, 20, seed=6, scale=45.0)  # ratios far beyond LEARNING_LIMIT
    assert float(wide.kernel_arrays()["ratio_bound"][0]) > learned_function.LEARNING_LIMIT
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(wide, backend, name, n_chains=4)
        assert not sampler.learns_compiled()
        sampler.step(30, learn=True)
        runs[backend] = sampler
    assert_same_run(runs["compiled"], runs["torch"])


@pytest.mark.parametrize("name", ["lsb2", "flsb2"])
def test_auto_takes_the_kernels_for_lsb2_on_many_chains(name):
    """On many chains ``auto`` takes LSB 2's learning and frozen steps on the kernels (both
    measured faster than torch's everywhere): the torch run's chains still."""
    target = RBM.random(30, 10, seed=2, scale=0.5)
    auto = make_sampler(name, target, 200, seed=3)
    assert auto.backend == "compiled" and auto.learns_compiled()
    reference = make_sampler(name, target, 200, seed=3, backend="torch")
    for sampler in (auto, reference):
        sampler.step(15, learn=True)
        sampler.step(10)
    assert_same_run(auto, reference)


def test_the_written_out_exp_matches_the_library_exp_down_to_the_subnormals():
    """The kernels take ``e^v`` (FLSB's first-order ratios, LSB 2's softplus) by a polynomial
    the compiler vectorises: within about one unit in the last place of numpy's over the normal
    range, ends included, the same subnormals below it and 0 past them."""
    rng = np.random.default_rng(0)
    limit = learned_function.LEARNING_LIMIT
    ends = [0.0, -0.0, 1e-300, limit, -limit, 0.5 * math.log(2.0), 709.0, -708.0]
    v = np.concatenate([rng.uniform(-708, 709, 50_000), rng.uniform(-1, 1, 50_000), ends])
    out = np.empty_like(v)
    vector_math._vector_exp(v, out, np.empty((2, v.shape[0]), dtype=np.int64))
    exact = np.exp(v)
    assert float(np.max(np.abs(out - exact) / exact)) < 4.5e-16
    tiny = np.array([-720.0, -740.0, -745.0, -800.0, -5000.0, -math.inf])
    out = np.empty_like(tiny)
    vector_math._vector_exp(tiny, out, np.empty((2, tiny.shape[0]), dtype=np.int64))
    np.testing.assert_allclose(out, np.exp(tiny), rtol=1e-12, atol=1e-323)
    # the first-order ratios' path: t = e^(-2 x d)
    x = np.where(rng.random(v.shape[0]) < 0.5, 1.0, -1.0)
    d = -np.clip(v, -limit, limit) / (2.0 * x)
    t = np.empty_like(v)
    powers = np.empty((2, v.shape[0]), dtype=np.int64)
    rbm_learning_kernels._first_order_exps(x, d, t, np.empty_like(v), powers)
    exact = np.exp(-2.0 * x * d)
    assert float(np.max(np.abs(t - exact) / exact)) < 4.5e-16


def test_the_networks_values_and_slopes_at_every_site_match_torchs_network():
    """LSB 2's ``g`` at a whole state and ``dZ`` in every piece's slope and intercept, from
    the sites side by side (written-out ``exp`` and ``log1p``), against the torch function and
    autograd, on a network whose inputs cross both of softplus's special ranges (below -30:
    ``e^z``; above 20: ``z``)."""
    function = NetworkBalancing(hidden=6)
    with torch.no_grad():  # breakpoints -b1/w1 inside (-1/2, 1/2), z over about +-100
        function.layer1.weight.copy_(torch.tensor([[8.0], [-6.0], [5.0], [-4.0], [9.0], [3.0]]))
        function.layer1.bias.copy_(torch.tensor([1.0, 1.5, -2.0, 0.5, -0.9, 0.3]))
        function.layer2.weight.copy_(torch.tensor([[20.0, -25.0, 30.0, -15.0, 10.0, -12.0]]))
        function.layer2.bias.fill_(-5.0)
    s = torch.linspace(-40.0, 40.0, 801, dtype=torch.float64)
    breakpoints, slope, intercept = function.pieces()
    pieces = (breakpoints, slope, intercept)
    u = torch.sigmoid(s) - 0.5
    z = function.layer2(torch.relu(function.layer1(torch.cat([u, -u]).unsqueeze(-1))))
    assert float(z.detach().min()) < -30.0 and float(z.detach().max()) > 20.0
    assert len(breakpoints) >= 4
    log_g = torch.logaddexp(function.log_h(s, pieces), s + function.log_h(-s, pieces))
    g_torch = torch.exp(log_g - math.log(2.0))
    grads = torch.autograd.grad(g_torch.sum(), [slope, intercept])
    g = np.empty(s.shape[0])
    dphi = np.zeros(2 * slope.shape[0])
    _, rows, kinds, powers = learned_function._scratch(s.shape[0])
    total = learned_function._network_values(
        torch.exp(s).numpy(), np.asarray(breakpoints, dtype=np.float64),
        slope.detach().numpy().copy(), intercept.detach().numpy().copy(), g, dphi, rows, kinds,
        powers,
    )  # fmt: skip
    np.testing.assert_allclose(g, g_torch.detach().numpy(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(total, float(g_torch.detach().sum()), rtol=1e-12)
    np.testing.assert_allclose(dphi, torch.cat(grads).numpy(), rtol=1e-10, atol=1e-10)
