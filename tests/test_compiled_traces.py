"""The batched samplers' compiled steps write the step trace themselves (issue 45 item 4): a
``Comparison`` that records every step (the RBM and network pages do) runs them compiled, where
it used to fall back to torch steps, 30-300x slower.

A trace row is what ``BatchedSampler._fill_trace`` writes after a torch step: ``log p~``,
``sum x``, ``x . truth``, the sites changed, the proposed site (-1 for a block move). Checked
two ways: against the same sampler taken one compiled step at a time with the statistics read
after each (every sampler and target the kernels serve, random blocks included), and against
the torch step's own trace where the backends give the same chains.
"""

from __future__ import annotations

import pytest
import torch

from lsbcore.comparison import Comparison
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.rbm import RBM
from tests.test_block_local_scores import ising

pytestmark = pytest.mark.usefixtures("single_thread")


def rbm() -> RBM:
    model = RBM.random(12, 5, seed=4, scale=0.8)
    return RBM(model.W, model.b_visible, model.b_hidden, shape=(3, 4))


TARGETS = {
    "rbm": rbm,
    "network": lambda: grid_network(4, 0.5, seed=2),
    "ising": lambda: ising(3, 4, "free", False, 2),
}
CASES = [
    ("rbm", "gibbs", {}),
    ("rbm", "metropolis", {}),
    ("rbm", "gwg", {}),
    ("rbm", "flsb1", {}),
    ("rbm", "barker", {}),
    ("rbm", "lsb1", {}),
    ("rbm", "lsb2", {}),
    ("rbm", "block-gibbs", {"block_size": 3}),
    ("rbm", "hamming-ball", {"block_size": 4, "radius": 1, "blocks": "shuffled"}),
    ("network", "gibbs", {}),
    ("network", "metropolis", {}),
    ("network", "barker", {}),
    ("network", "sqrt", {}),
    ("ising", "block-gibbs", {"block_size": 2}),
    ("ising", "hamming-ball", {"block_size": 4, "radius": 1, "blocks": "sweep"}),
]
IDS = [f"{t}-{name}-{len(o)}" for t, name, o in CASES]
SAME_CHAINS = ("gibbs", "gwg", "barker", "lsb1")  # a few whose torch and compiled chains agree


def truth_of(target) -> torch.Tensor:
    g = torch.Generator().manual_seed(9)
    return torch.where(torch.rand(target.shape, generator=g) < 0.5, -1.0, 1.0).double()


def frozen(name, target, backend, options, chains=5, seed=7):
    sampler = make_sampler(name, target, chains, seed=seed, backend=backend, **options)
    if sampler.learnable:
        sampler.step(30, learn=True)  # something learned, then frozen as after burn-in
        sampler.balancing.frozen()
    sampler.track_statistics(truth_of(target))
    return sampler


@pytest.mark.parametrize(("target", "name", "options"), CASES, ids=IDS)
def test_a_compiled_trace_is_the_states_step_by_step(target, name, options):
    model = TARGETS[target]()
    options = dict(options, resync_every=23)  # resyncs inside the traced call
    traced = frozen(name, model, "compiled", options)
    stepped = frozen(name, model, "compiled", options)
    steps = 60
    trace = torch.full((steps, traced.n_chains, 5), torch.nan, dtype=torch.float64)
    traced.step(steps, trace=trace)
    rows = []
    for _ in range(steps):
        before = stepped._x.clone()
        stepped.step(1)
        info = stepped.step_info
        site = getattr(info, "site", None)
        rows.append(
            torch.cat(
                [
                    stepped.statistics,
                    (stepped._x != before).sum(1, keepdim=True).double(),
                    torch.full((stepped.n_chains, 1), -1.0)
                    if site is None
                    else site.view(-1, 1).double(),
                ],
                1,
            )
        )
    expected = torch.stack(rows)
    assert torch.equal(traced.x, stepped.x)
    assert torch.equal(trace[:, :, 1:], expected[:, :, 1:])  # integers: exact
    torch.testing.assert_close(trace[:, :, 0], expected[:, :, 0], rtol=0, atol=1e-9)
    assert trace[:, :, 3].sum() > 0  # the chains moved: the test sees flips


@pytest.mark.parametrize(
    ("target", "name", "options"),
    [c for c in CASES if c[1] in SAME_CHAINS or c[2].get("blocks") == "sweep"],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_compiled_trace_is_the_torch_steps_trace(target, name, options):
    model = TARGETS[target]()
    traces = {}
    for backend in ("compiled", "torch"):
        sampler = frozen(name, model, backend, dict(options, resync_every=23))
        trace = torch.empty(50, sampler.n_chains, 5, dtype=torch.float64)
        sampler.step(50, trace=trace)
        traces[backend] = trace
    assert torch.equal(traces["compiled"][:, :, 1:], traces["torch"][:, :, 1:])
    torch.testing.assert_close(
        traces["compiled"][:, :, 0], traces["torch"][:, :, 0], rtol=0, atol=1e-9
    )


def test_a_recording_comparison_on_an_rbm_runs_its_compiled_steps():
    """What the RBM page records, step for step, is what the torch steps would have recorded,
    and the compiled backend is the one used (no silent fallback while tracing)."""
    model = rbm()
    names = ["gibbs", "gwg", "block-gibbs"]
    runs = {}
    for backend in ("compiled", "torch"):
        comparison = Comparison(names, model, 4, seed=3, thin=1, backend=backend)
        comparison.step(40)
        runs[backend] = comparison
    for name in names:
        compiled, torch_run = runs["compiled"].traces[name], runs["torch"].traces[name]
        assert runs["compiled"][name].backend == "compiled"
        if name == "block-gibbs":  # random blocks: the same law, other draws
            continue
        ours, theirs = compiled.arrays(), torch_run.arrays()
        for field in ("log_p", "magnetisation", "accept_rate", "target_evals"):
            torch.testing.assert_close(  # the start's acceptance rate is NaN in both
                torch.as_tensor(ours[field]), torch.as_tensor(theirs[field]), equal_nan=True
            )


def test_the_recorded_benchmark_runs_every_sampler_compiled(capsys):
    from lsbcore.studies.benchmarks import recorded

    assert recorded.main(["--seconds", "0.01", "--call", "8"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == sum(len(names) for *_, names in recorded.cases())
    assert all(row.endswith("compiled") for row in rows), rows
