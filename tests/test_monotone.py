"""LSB 2' (``lsb2-monotone``): ``g(t) = min{h(t), t h(1/t)}`` with ``h`` a min-max network whose
slopes in ``log t`` lie in ``[0, 1]``, against exact answers: the balancing property, monotone
``h`` and ``g``, the exact ``g(0)``, the active-unit evaluation against the dense network, and
the frozen chain's law against enumeration."""

from __future__ import annotations

import pytest
import torch

from lsbcore.learning.balancing import make_balancing
from lsbcore.learning.monotone import MonotoneBalancing

pytestmark = pytest.mark.usefixtures("single_thread")  # many tiny ops: one thread is faster


def wild(seed: int, groups: int = 6, units: int = 5, project: bool = True) -> MonotoneBalancing:
    """A network with random parameters far from any learned one, projected onto [0, 1]."""
    net = MonotoneBalancing(groups, units)
    generator = torch.Generator().manual_seed(seed)
    normal = torch.randn(2, groups, units, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        net.slope.copy_(normal[0] * 2)
        net.intercept.copy_(normal[1] * 3)
    if project:
        net.project_()
    return net


def dense_log_g(net: MonotoneBalancing, s: torch.Tensor) -> torch.Tensor:
    """The network as written, every unit at every input (with autograd): the reference."""

    def phi(v):
        return (v[..., None, None] * net.slope + net.intercept).amin(-1).amax(-1)

    return torch.minimum(phi(s), s + phi(-s))


S50 = torch.linspace(-50.0, 50.0, 20001, dtype=torch.float64)


# ----------------------------------------------------------------- the balancing property
@pytest.mark.parametrize("seed", range(4))
def test_g_equals_t_g_of_one_over_t_to_1e_12_for_random_parameters(seed):
    for net in (wild(seed), wild(seed, project=False), make_balancing("lsb2-monotone", seed=seed)):
        with torch.no_grad():
            gap = net.log_g(S50) - (S50 + net.log_g(-S50))  # log g(t) - log(t g(1/t))
        assert float(gap.abs().max()) < 1e-12
