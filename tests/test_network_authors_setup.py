"""Table 3 as the authors ran it (their public UAI scripts): LSB 2 is the monotone network
started at max(1, t) with their monotonicity penalty, chains start at all zeros, mixing restarts
from sqrt(t)'s burn-in states, lag window 400, SGD with momentum at lr 1e-4; each an option
whose default is theirs, checked against exact answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore.balancing.functions import FixedBalancing, PinnedZeroBalancing, make_balancing
from lsbcore.balancing.monotone import MonotoneBalancing
from lsbcore.diagnostics.mixing import ess_paper
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.registry import make_sampler
from lsbcore.studies.experiment import cli
from lsbcore.studies.networks import protocol
from lsbcore.studies.networks.experiment import (
    build_parser,
    run_sampler,
    sampler_options,
    settings_of,
    start_states,
)
from lsbcore.targets.grid_network import grid_network

pytestmark = pytest.mark.usefixtures("single_thread")


def _one_line(slope: float, intercept: float, **kwargs) -> MonotoneBalancing:
    """A 1 x 1 network: phi(s) = slope * s + intercept, h(t) = e^b t^w, t h(1/t) = e^b t^(1-w)."""
    net = MonotoneBalancing(groups=1, units=1, **kwargs)
    with torch.no_grad():
        net.slope.fill_(slope)
        net.intercept.fill_(intercept)
    return net


def test_the_penalty_and_its_gradient_are_the_hand_computed_derivative():
    # u(t) = e^b t^(1-w) with w = 2: u'(t) = -e^b t^-2, so the penalty is e^b / t^2 (mean over t)
    w, b = 2.0, 0.3
    t = torch.tensor([0.5, 1.5], dtype=torch.float64)
    net = _one_line(w, b, monotonicity="penalty")
    penalty = net.monotonicity_penalty(t)
    exact = float(torch.mean(math.exp(b) * t ** (-w)))
    assert float(penalty.detach()) == pytest.approx(exact, rel=1e-5)
    penalty.backward()
    # d/db: the same value; d/dw of (w - 1) e^b t^-w: e^b t^-w (1 - (w - 1) log t)
    grad_w = torch.mean(math.exp(b) * t ** (-w) * (1 - (w - 1) * torch.log(t)))
    assert float(net.intercept.grad.sum()) == pytest.approx(exact, rel=1e-5)
    assert float(net.slope.grad.sum()) == pytest.approx(float(grad_w), rel=1e-4)


def test_the_penalty_is_zero_where_t_h_of_1_over_t_increases_and_off_under_projection():
    t = torch.linspace(0.01, 2.0, 50, dtype=torch.float64)
    flat = _one_line(0.4, 0.1, monotonicity="penalty").monotonicity_penalty(t)
    assert float(flat.detach()) == 0.0
    generator = torch.Generator().manual_seed(0)
    assert _one_line(2.0, 0.0).learning_penalty(generator, 5) is None  # projection: nothing
    weighted = _one_line(2.0, 0.0, monotonicity="penalty", penalty=3.0)
    draws = torch.rand(5, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2
    expected = 3.0 * float(torch.mean(draws ** (-2.0)))  # t ~ U(0, 2), one per chain
    got = float(weighted.learning_penalty(torch.Generator().manual_seed(1), 5).detach())
    assert got == pytest.approx(expected, rel=1e-5)


def test_under_the_penalty_slopes_may_exceed_one_but_never_go_below_zero():
    net = _one_line(0.5, 0.0, monotonicity="penalty")
    with torch.no_grad():
        net.slope.fill_(1.7)
    net.project_()
    assert float(net.slope) == 1.7
    with torch.no_grad():
        net.slope.fill_(-0.2)
    net.project_()
    assert float(net.slope) == 0.0
    projected = _one_line(1.7, 0.0)
    projected.project_()
    assert float(projected.slope) == 1.0


def test_lsb2_started_at_max_is_max_1_t_exactly():
    net = make_balancing("lsb2-monotone", init="max", monotonicity="penalty")
    t = np.array([1e-6, 0.01, 0.5, 1.0, 2.0, 100.0, 1e6])
    assert np.allclose(net.g(t), np.maximum(1.0, t), rtol=1e-12, atol=0) and net.g0() == 1.0
    assert net.monotonicity == "penalty" and (net.groups, net.units) == (20, 20)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"init": "min"}, "init must be one of sqrt, max, got 'min'."),
        ({"monotonicity": "hope"}, "monotonicity must be one of projection, penalty, got 'hope'."),
        ({"penalty": -1.0}, "penalty must be"),
    ],
)
def test_bad_lsb2_options_are_refused_in_a_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make_balancing("lsb2-monotone", **kwargs)


def test_the_registry_passes_the_options_and_learning_runs_under_the_penalty():
    network = grid_network(3, 0.5, seed=1, epsilon=1e-3)
    x0 = start_states(network.shape, 5, [0], "zeros")
    options = sampler_options("lsb2-monotone", protocol.AUTHORS)
    sampler = make_sampler("lsb2-monotone", network, 5, seed=0, x0=x0, backend="torch", **options)
    assert sampler.balancing.monotonicity == "penalty" and sampler.balancing.g0() == 1.0
    assert (sampler.optimizer_name, sampler.lr) == ("sgd", 1e-4)
    sampler.step(20, learn=True)
    assert not sampler.learning_failed
    assert sampler_options("lsb2", protocol.AUTHORS) == {"optimizer": "sgd", "lr": 1e-4}
    assert sampler_options("max", protocol.AUTHORS) == {}


def test_starts_are_exactly_zeros_or_each_seeds_uniform_draw():
    zeros = start_states((3, 3), 5, [0, 1], "zeros")
    assert zeros.shape == (10, 3, 3) and bool((zeros == -1.0).all())  # 0 is -1 in +-1 states
    uniform = start_states((3, 3), 5, [0, 1], "uniform")
    assert torch.equal(uniform, torch.cat([uniform_start((3, 3), 5, s) for s in (0, 1)]))
    with pytest.raises(ValueError, match="start must be one of zeros, uniform, got 'ones'."):
        start_states((3, 3), 5, [0], "ones")


def test_mixing_starts_from_the_given_states_with_the_authors_lag_window():
    """Recomputed by hand: the chains sample from ``mixing_x0`` (sqrt(t)'s burn-in states),
    not from where their own burn-in would have left them, with lag window 400."""
    network = grid_network(4, 0.5, seed=1, epsilon=1e-3)
    seeds, steps = [0, 1], 450
    x0 = start_states(network.shape, 5, seeds, "zeros")
    mix = torch.cat([uniform_start(network.shape, 5, s + 7) for s in seeds])
    result = run_sampler(network, "min", seeds, 30, steps, 5, dict(protocol.AUTHORS), x0, mix)
    sampler = make_sampler("min", network, 10, seed=0, x0=mix, backend="torch")
    series = np.empty((10, steps))
    for t in range(steps):
        sampler.step(1)
        series[:, t] = sampler.x.reshape(10, -1).sum(1).numpy()
    ess = ess_paper(series, max_lag=400)
    assert result["max_lag"] == 400
    assert result["ess_by_seed"] == pytest.approx([ess[:5].mean(), ess[5:].mean()], abs=1e-12)


def test_the_g0_pair_differs_in_g0_only():
    pinned = PinnedZeroBalancing(FixedBalancing("max"))
    s = torch.tensor([-math.inf, -50.0, -1.0, 0.0, 3.0, math.inf], dtype=torch.float64)
    plain = FixedBalancing("max").log_g(s)
    got = pinned.log_g(s)
    assert got[0] == -math.inf and plain[0] == 0.0
    assert torch.equal(got[1:], plain[1:]) and pinned.g0() == 0.0


def test_the_command_defaults_are_the_authors_setup_and_bad_options_are_refused(capsys):
    args = build_parser().parse_args(["--target", "markov-networks"])
    assert settings_of(args) == protocol.AUTHORS
    assert protocol.AUTHORS == {
        "start": "zeros", "mixing_start": "sqrt-burn-in", "lag": 400, "optimizer": "sgd",
        "lr": 1e-4, "monotonicity": "penalty", "init": "max",
    }  # fmt: skip
    assert protocol.LABELS["lsb2-monotone"] == "LSB 2"
    assert protocol.LABELS["lsb2"] == "LSB 2 (appendix G, 10 units)"
    paper = protocol.PAPER_TABLE3["mn1"]
    assert "lsb2-monotone" in paper and "lsb2" not in paper
    for argv, message in [
        (["--lr", "0"], "--lr: must be in (0, 1], got 0"),
        (["--lag", "0"], "--lag: must be between 1 and 10,000, got 0"),
        (["--start", "ones"], "--start: invalid choice: 'ones'"),
    ]:
        with pytest.raises(SystemExit) as exc:
            cli.main(["--target", "markov-networks", *argv])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and "Traceback" not in err
