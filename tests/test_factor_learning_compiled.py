"""The learning steps of LSB 1 and LSB 2 run compiled on a factor graph (issue 45 item 3), with
exact ratios and with gradient ones (FLSB, whose first-order ratios on a factor graph are the
exact ones): from the same uniforms they give the torch learning step's chains, parameters,
losses and caches, with Adam and with SGD, with hard zeros in the tables, through resyncs,
restarts, backend switches and a divergence; FLSB's frozen steps and Gibbs with Gradients' are
the exact kernel's and give the torch steps' chains; ``auto`` takes them, and a graph whose
ratios exceed the kernel's range learns on torch steps.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from lsbcore.backends import learned_function
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network
from tests.test_factor_balanced import tiny_graph
from tests.test_rbm_learning_compiled import assert_same_run
from tests.warm_up_support import after_warm_up

pytestmark = pytest.mark.usefixtures("single_thread")

LEARNED = ("lsb1", "lsb2", "lsb2-monotone")
ALL = ("lsb1", "flsb1", "lsb2", "flsb2", "lsb2-monotone")


def graph(epsilon=1e-3, seed=3):
    """A 6 x 6 grid network; ``epsilon = 0`` puts hard zeros in its tables (no gradient then)."""
    return grid_network(6, 0.5, seed=seed, epsilon=epsilon)


def assert_same_frozen_run(compiled, torch_run, first_order: str):
    """Two runs of frozen steps are where the other is: chains, counts, ``log p~``, the cached
    first-order ratios or gradient (``first_order``), the last step and the evaluations."""
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.equal(compiled._n_accepted, torch_run._n_accepted)
    assert int(compiled._n_accepted.sum()) > 0
    torch.testing.assert_close(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    torch.testing.assert_close(
        getattr(compiled, first_order), getattr(torch_run, first_order), rtol=1e-10, atol=1e-9
    )
    info, info_t = compiled.step_info, torch_run.step_info
    assert torch.equal(info.site, info_t.site)
    torch.testing.assert_close(info.accept_prob, info_t.accept_prob, rtol=1e-9, atol=1e-12)
    assert compiled.n_target_evals == torch_run.n_target_evals
    assert compiled.invariant_error() < 1e-9


def learner(target, backend, name="lsb1", n_chains=5, seed=7, **options):
    sampler = make_sampler(name, target, n_chains, seed=seed, backend=backend, **options)
    assert sampler.backend == backend
    return sampler


def both(target, name, steps, **options):
    """The compiled and the torch run of ``steps`` learning steps from one seed."""
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name, **options)
        sampler.step(steps, learn=True)
        runs[backend] = sampler
    return runs["compiled"], runs["torch"]


@pytest.mark.parametrize(
    "name, epsilon",
    [("lsb1", 1e-3), ("lsb1", 0.0), ("lsb2", 1e-3), ("lsb2", 0.0), ("flsb1", 1e-3),
     ("flsb2", 1e-3), ("lsb2-monotone", 1e-3), ("lsb2-monotone", 0.0)],
    ids=["lsb1", "lsb1, hard zeros", "lsb2", "lsb2, hard zeros", "flsb1", "flsb2", "lsb2'",
         "lsb2', hard zeros"],
)  # fmt: skip
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_compiled_learning_gives_the_torch_steps_chains_parameters_and_losses(
    name, epsilon, optimizer
):
    target = graph(epsilon)
    compiled, torch_run = both(
        target, name, 150, optimizer=optimizer, lr=0.05, resync_every=70
    )  # resyncs inside
    assert compiled.learns_compiled() and not torch_run.learns_compiled()
    assert_same_run(compiled, torch_run)
    # it learned: the parameters moved well away from their start
    start = learner(target, "torch", name)._parameter_vector()
    assert float((compiled._parameter_vector() - start).abs().max()) > 0.05
    assert 0 < int(compiled._n_accepted.sum()) < 150 * compiled.n_chains
    # and the frozen steps after it agree as well
    for sampler in (compiled, torch_run):
        sampler.balancing.frozen()
        sampler.step(100)
    assert torch.equal(compiled.x, torch_run.x)
    assert compiled.invariant_error() < 1e-9


@pytest.mark.parametrize("name", LEARNED)
def test_hard_zeros_of_every_arity_give_the_torch_chains(name):
    """A graph with a constant factor, factors of arity 1 to 3 and zero entries in two tables:
    proposals into zero mass are taken as the torch step takes them (never accepted, no weight
    in the loss), and so are uniform flips into zero mass (T = 0)."""
    target = tiny_graph()
    compiled, torch_run = both(target, name, 300, n_chains=6, lr=0.05, resync_every=90)
    assert_same_run(compiled, torch_run)
    # zero mass was proposed and refused along the way: every state the chains hold has mass
    assert bool(torch.isfinite(compiled.log_p).all())


@pytest.mark.parametrize("name", ALL)
def test_restarts_inside_a_call_give_the_torch_chains(name):
    compiled, torch_run = both(graph(), name, 120, restart_prob=0.02, seed=11)
    assert_same_run(compiled, torch_run)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_short_calls_and_torch_learning_steps_among_them_give_one_long_calls_run(name, optimizer):
    """The optimiser's state passes between the kernel and ``torch.optim``, and FLSB's exact
    ratios are recomputed after torch steps moved the chains: one run, whatever the calls."""
    target = graph()
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
    traces = {}
    for backend in ("compiled", "torch"):
        sampler = learner(graph(), backend, name)
        sampler.track_statistics()
        trace = torch.zeros(40, sampler.n_chains, 5, dtype=torch.float64)
        sampler.step(40, learn=True, trace=trace)
        traces[backend] = trace
    torch.testing.assert_close(traces["compiled"], traces["torch"], rtol=0, atol=1e-9)
    assert float(traces["compiled"][:, :, 3].sum()) > 0  # moves were recorded


@pytest.mark.parametrize("name", ALL)
def test_a_non_finite_loss_stops_compiled_learning_as_the_torch_step_does(name):
    """A NaN log p~ makes the loss NaN: the last good parameters stay, the history stops, the
    sampler warns and goes on with frozen (compiled) steps, as the torch run does."""
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(graph(), backend, name)
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
    # FLSB's torch step no longer moves the corrupted chain (its log p~ ratio is a difference
    # of evaluations, NaN), the exact kernel does (a sum of table entries): the others agree
    kept = [b for b in range(5) if b != 2 or not name.startswith("f")]
    assert torch.equal(runs["compiled"].x[kept], runs["torch"].x[kept])
    assert runs["compiled"].n_steps == runs["torch"].n_steps == 38


@pytest.mark.parametrize("name", ["flsb1", "flsb2", "flsb1-frozen"])
def test_flsb_frozen_steps_are_compiled_with_the_torch_flsb_chains(name):
    """FLSB's frozen steps run the exact kernel (its ratios are the exact ones here): the torch
    FLSB step's chains, acceptance probabilities within rounding, caches that equal a
    recompute."""
    target = graph(seed=5)
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name.removesuffix("-frozen"), resync_every=150)
        if name.endswith("-frozen"):
            sampler.step(50, learn=True)
            sampler.balancing.frozen()
        sampler.step(400)
        runs[backend] = sampler
    assert_same_frozen_run(runs["compiled"], runs["torch"], "_s_tilde")


def test_gibbs_with_gradients_is_compiled_with_the_torch_steps_chains_across_backends():
    """GWG on a factor graph runs the exact kernel with ``sqrt``: the torch step's chains, in
    calls of any length, with torch steps among them (which move the chains: the exact ratios
    kept beside ``d`` are recomputed), and ``auto`` takes it."""
    target = graph(seed=6)
    assert make_sampler("gwg", target, 2, seed=0).backend == "compiled"
    compiled = learner(target, "compiled", "gwg", resync_every=150)
    torch_run = learner(target, "torch", "gwg", resync_every=150)
    backends = ["compiled", "torch", "compiled", "torch", "compiled"]
    for steps, backend in zip([37, 5, 100, 9, 263], backends, strict=True):
        compiled.set_backend(backend)
        compiled.step(steps)
        torch_run.step(steps)
    assert_same_frozen_run(compiled, torch_run, "_grad")


def test_first_order_ratios_on_a_factor_graph_are_the_exact_ones():
    """What FLSB's compiled steps rest on: the gradient of the tables' multilinear extension at
    a state of +-1 gives every flip's exact log-ratio (tables of arity 1 to 3)."""
    g = torch.Generator().manual_seed(2)
    scopes = [[0], [1, 2], [0, 3, 4], [2, 4], [1, 3, 4]]
    tables = [torch.randn(2 ** len(s), generator=g, dtype=torch.float64) for s in scopes]
    target = FactorGraph(5, scopes, tables)
    x = 2.0 * torch.tensor(list(itertools.product([0, 1], repeat=5)), dtype=torch.float64) - 1
    first_order = -2.0 * x * target.grad_log_prob(x)
    torch.testing.assert_close(first_order, target.flip_log_ratios(x), rtol=0, atol=1e-12)


def test_the_ratio_bound_bounds_every_finite_ratio_and_is_reached_by_one_factor():
    target = tiny_graph()
    x = 2.0 * torch.tensor(list(itertools.product([0, 1], repeat=5)), dtype=torch.float64) - 1
    s = target.flip_log_ratios(x)
    finite = s[torch.isfinite(s)]
    assert float(finite.abs().max()) <= target.ratio_bound() + 1e-12
    # entries by (x0 > 0, x1 > 0): 00 -> -1, 01 -> 3, 10 -> 0, 11 zero mass; the finite entries
    # span 4, which flipping x1 at (-1, -1) reaches
    single = FactorGraph(2, [[0, 1]], [torch.tensor([-1.0, 3.0, 0.0, -math.inf])])
    assert single.ratio_bound() == pytest.approx(4.0)
    s_single = single.flip_log_ratios(torch.tensor([[-1.0, -1.0]]))
    assert s_single.tolist() == [[1.0, 4.0]]


@pytest.mark.parametrize("name", ALL)
def test_auto_learns_compiled_and_a_graph_beyond_the_kernels_range_learns_on_torch(name):
    assert make_sampler(name, graph(), 3, seed=0).learns_compiled()
    assert not make_sampler(name, graph(), 3, seed=0, backend="torch").learns_compiled()
    wide = FactorGraph(
        4,
        [[0, 1], [1, 2], [2, 3]],
        [torch.tensor([0.0, 400.0, 1.0, 2.0], dtype=torch.float64)] * 3,
    )  # a flip of variable 1 can move log p~ by 400: beyond the kernel's range
    assert wide.ratio_bound() > learned_function.LEARNING_LIMIT
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(wide, backend, name, n_chains=4)
        assert not sampler.learns_compiled()
        sampler.step(30, learn=True)
        runs[backend] = sampler
    assert_same_run(runs["compiled"], runs["torch"])


def test_lsb2_monotone_under_the_authors_penalty_learns_on_torch_steps():
    """The penalty draws its points from the sampler's generator: that variant learns on torch
    steps (its frozen steps are compiled); the projected one on the kernel."""
    penalty = make_sampler("lsb2-monotone", graph(), 3, seed=0, monotonicity="penalty")
    assert penalty.backend == "compiled" and not penalty.learns_compiled()
    penalty.step(5, learn=True)
    assert len(penalty.history) > 0
    assert make_sampler("lsb2-monotone", graph(), 3, seed=0).learns_compiled()


@pytest.mark.parametrize("name", LEARNED)
def test_chains_whose_every_flip_leads_into_zero_mass_learn_as_the_torch_step(name):
    """Three variables held equal by hard constraints: from an allowed state every flip has zero
    mass, so under LSB 2' (``g(0) = 0``) ``Z = 0`` and the step's terms do not depend on
    ``theta``; only ``eta`` learns. LSB 1 and 2 (``g(0) > 0``) propose the flips and refuse
    them. The kernel does as the torch step, whose stand-in keeps the loss finite."""
    equal = torch.tensor([0.0, -math.inf, -math.inf, 0.0], dtype=torch.float64)
    target = FactorGraph(3, [[0, 1], [1, 2], [0]], [equal, equal, torch.tensor([0.0, 0.4])])
    compiled, torch_run = both(target, name, 60, n_chains=4, lr=0.05)
    assert_same_run(compiled, torch_run)
    assert int(compiled._n_accepted.sum()) == 0
    start = learner(target, "torch", name, n_chains=4)
    moved = (compiled._parameter_vector() - start._parameter_vector()).abs()
    assert float(moved[-1]) > 0  # eta learned
    if name == "lsb2-monotone":
        assert compiled.balancing.g0() == 0.0
        assert float(moved[:-1].abs().max()) == 0.0  # theta did not: T = 0 for every theta


@pytest.mark.parametrize("name", ["gwg", "flsb1"])
def test_a_new_target_on_the_same_graph_is_read_by_the_next_compiled_call(name):
    """The exact ratios kept beside the first-order ones belong to the target they were
    computed on: after ``set_target`` (the page's new epsilon) the compiled steps read the new
    tables, as the torch steps do."""
    before, after = graph(epsilon=1e-3, seed=4), graph(epsilon=0.05, seed=4)
    assert before.same_graph(after)
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = learner(before, backend, name)
        sampler.step(150)
        sampler.set_target(after)
        sampler.step(150)
        runs[backend] = sampler
    compiled, torch_run = runs["compiled"], runs["torch"]
    assert torch.equal(compiled.x, torch_run.x)
    torch.testing.assert_close(compiled.log_p, torch_run.log_p, rtol=0, atol=1e-9)
    assert compiled.invariant_error() < 1e-9


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_lsb2_monotones_projection_binds_as_in_the_torch_step(optimizer):
    """LSB 2''s steps push slopes past ``[0, 1]`` and the projection brings them back, between
    the optimiser's step and the check: the torch run's parameters, with slopes on both bounds.
    (Started at ``max(1, t)`` every unit of a group ties with the others, and the torch step's
    rounding noise, which Adam scales up, picks among them: no run matches another there.)"""
    compiled, torch_run = both(graph(), "lsb2-monotone", 150, optimizer=optimizer, lr=0.05)
    assert_same_run(compiled, torch_run)
    slopes = compiled.balancing.slope.detach()
    assert int((slopes == 0).sum()) > 5 and int((slopes == 1).sum()) > 5


@pytest.mark.parametrize(
    "name, epsilon",
    [("lsb1", 1e-3), ("lsb2", 0.0), ("flsb2", 1e-3), ("lsb2-monotone", 1e-3)],
    ids=["lsb1", "lsb2, hard zeros", "flsb2", "lsb2'"],
)  # fmt: skip
def test_chain_groups_on_all_cores_give_the_torch_steps_run(name, epsilon, monkeypatch):
    """The parallel twin runs a step's chains in groups side by side (each chain's term of the
    loss and its move in its group), then the sums over the chains and the update: the torch
    step's chains, parameters, losses and trace, with groups of unequal sizes."""
    from lsbcore.backends import threads

    if not threads.parallel_ready():
        pytest.skip("no thread-safe numba threading layer (OpenMP or TBB) on this machine")
    monkeypatch.setattr(threads, "cores", lambda: 3)
    monkeypatch.setattr(threads, "MIN_LEARNING_WORK", 1)
    assert threads.learning_groups(7, 1) == 3
    target = graph(epsilon)
    runs, traces = {}, {}
    for backend in ("compiled", "torch"):
        sampler = learner(target, backend, name, n_chains=7, lr=0.05)
        sampler.track_statistics()
        traces[backend] = torch.zeros(120, 7, 5, dtype=torch.float64)
        sampler.step(120, learn=True, trace=traces[backend])
        runs[backend] = sampler
    assert runs["compiled"].learns_compiled()
    assert_same_run(runs["compiled"], runs["torch"])
    torch.testing.assert_close(traces["compiled"], traces["torch"], rtol=0, atol=1e-9)


def test_learning_on_a_factor_graph_runs_in_groups_from_a_few_chains(monkeypatch):
    """The grid network's 100 sites: two groups from 6 chains (where the timings say they pay),
    one below, and one without a thread-safe layer."""
    from lsbcore.backends import threads
    from lsbcore.samplers.balanced.factor_graph_steps import LEARNING_WORK_PER_SITE

    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)
    work = LEARNING_WORK_PER_SITE * 100
    assert [threads.learning_groups(c, work) for c in (1, 4, 5, 6, 30)] == [1, 1, 1, 2, 2]
    monkeypatch.setattr(threads, "parallel_ready", lambda: False)
    assert threads.learning_groups(30, work) == 1


def test_the_warm_up_compiles_the_learning_steps_kernel():
    """The app's warm-up thread compiles the factor graphs' learning kernel: a network page's
    first run (5 chains: the serial kernel) does not wait for numba. In a fresh process."""
    probe = "from lsbcore.backends import factor_learning_kernels as k; "
    assert int(after_warm_up(probe + "print(len(k.exact_learning.signatures))")) >= 1
