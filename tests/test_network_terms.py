"""LSB 2's network at every site at once (``backends.network_terms``) and the written-out
``log1p`` it takes (``backends.vector_math``): the torch network's ``g`` to rounding in every
regime of its softplus, and the range on which the form on ``g(t)`` itself is exact."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore.backends.network_terms import (
    NETWORK_FLOOR,
    network_g,
    network_is_linear,
    network_scratch,
)
from lsbcore.backends.vector_math import _log1p_unit
from lsbcore.balancing.functions import NetworkBalancing
from lsbcore.samplers.balanced.backends import kernel_function


def network(seed: int, scale: float) -> NetworkBalancing:
    """A network with its output layer ``scale`` times the default draw: large scales of
    either sign put ``z`` past the softplus' linear (``> 20``) and exponential (``< -30``)
    ends."""
    function = NetworkBalancing(hidden=10, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        for p in function.layer2.parameters():
            p.mul_(scale)
    return function


def pre_softplus(f, u: np.ndarray) -> np.ndarray:
    """The network's ``z(u)`` from its pieces (``Function``)."""
    k = np.searchsorted(f.breakpoints, u, side="left")
    return f.slope[k] * u + f.intercept[k]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_network_values_are_the_torch_networks(seed):
    s = np.concatenate([np.linspace(-600.0, 600.0, 2001), np.linspace(-5.0, 5.0, 999)])
    u = 1.0 / (1.0 + np.exp(-s)) - 0.5
    regimes = set()
    for scale in (1.0, 400.0, -400.0):
        function = network(seed, scale)
        f = kernel_function(function)
        assert network_is_linear(f.breakpoints, f.slope, f.intercept)
        g = np.empty_like(s)
        network_g(np.exp(s), f.breakpoints, f.slope, f.intercept, g, network_scratch(len(s)))
        log_g = function.log_g(torch.from_numpy(s)).detach().numpy()
        exact = np.exp(log_g)
        # rounding: |log g| units in the last place from exp, and the input u's last place
        # (``sigmoid(s)`` in torch, ``t / (1 + t)`` here) times the steepest piece's slope
        tolerance = 1e-15 * (10.0 + np.abs(log_g)) + 1e-16 * np.abs(f.slope).max()
        assert np.all(g > 0.0)
        assert np.all(np.abs(g - exact) / exact < tolerance)
        z = np.concatenate([pre_softplus(f, u), pre_softplus(f, -u)])
        regimes |= {"exponential" if v < -30 else "linear" if v > 20 else "softplus" for v in z}
    assert regimes == {"exponential", "linear", "softplus"}


def test_the_written_out_log1p_is_within_a_few_units_in_the_last_place():
    y = np.concatenate([np.linspace(0.0, 1.0, 200_001), np.geomspace(1e-300, 1.0, 20_000)])
    got = np.array([_log1p_unit(v) for v in y[::50]] + [_log1p_unit(v) for v in y[-20_000:]])
    ref = np.log1p(np.concatenate([y[::50], y[-20_000:]]))
    assert got[0] == 0.0
    ulps = np.abs(got[1:] - ref[1:]) / np.spacing(ref[1:])
    assert float(ulps.max()) <= 3.0
    # the two branches meet at sqrt 2 - 1 without a step
    edge = math.sqrt(2.0) - 1.0
    below, above = _log1p_unit(np.nextafter(edge, 0.0)), _log1p_unit(np.nextafter(edge, 1.0))
    assert 0.0 <= above - below <= 4 * np.spacing(math.log1p(edge))


@pytest.mark.parametrize(
    ("bias", "linear"),
    [(NETWORK_FLOOR + 0.5, True), (NETWORK_FLOOR - 0.5, False), (1e300, False)],
)
def test_the_form_on_g_is_taken_only_where_every_h_is_far_inside_float64(bias, linear):
    function = network(0, 1.0)
    with torch.no_grad():
        function.layer2.weight.zero_()  # z = b2 on the whole input range
        function.layer2.bias.fill_(bias)
    f = kernel_function(function)
    assert network_is_linear(f.breakpoints, f.slope, f.intercept) is linear


def test_a_piece_that_dips_below_the_floor_inside_the_range_is_seen():
    """``z`` linear in ``u`` on a piece reaches its minimum at a piece's end: a slope that
    takes ``z`` from 0 at ``u = 0`` to -700 at ``u = -1/2`` is refused."""
    function = network(0, 1.0)
    with torch.no_grad():
        function.layer1.weight.fill_(1.0)
        function.layer1.bias.fill_(1.0)  # every unit active on (-1/2, 1/2): one piece
        function.layer2.weight.fill_(140.0)  # z = 1400 (u + 1) - 1400 + b2
        function.layer2.bias.fill_(-1400.0)
    f = kernel_function(function)
    assert f.slope.shape[0] == 1
    assert not network_is_linear(f.breakpoints, f.slope, f.intercept)
