"""Pairwise targets' compiled local fields and ``log p~`` (``lsbcore.backends.pairwise_fields``):
the values from the edge list by hand, on every kind of pairwise target; used on the CPU wherever
numba is installed, warmed up or not, and never where a gradient is asked."""

from __future__ import annotations

import pytest
import torch

from lsbcore.backends import pairwise_fields
from tests.test_block_local_scores import ising, random_mrf

TARGETS = {
    "mrf": lambda: random_mrf(9, 0),
    "mrf, a field per chain": lambda: random_mrf(9, 1, chains=5),
    "ising free": lambda: ising(4, 5, "free", False, 2),
    "ising periodic, edge scale, a field per chain": lambda: ising(4, 4, "periodic", True, 3, 5),
    "ising 2-wide torus (a multigraph)": lambda: ising(2, 5, "periodic", True, 4),
}


def by_hand(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The local fields and ``log p~`` from the field and the edge list, one edge at a time."""
    h = model.field.expand(x.shape[0], -1)
    fields, log_p = h.clone(), (h * x).sum(1)
    for (i, j), w in zip(model.edges.tolist(), model.edge_weights.tolist(), strict=True):
        fields[:, i] += w * x[:, j]
        fields[:, j] += w * x[:, i]
        log_p += w * x[:, i] * x[:, j]
    return fields, log_p


def states(model, chains: int) -> torch.Tensor:
    u = torch.rand(chains, model.n_sites, generator=torch.Generator().manual_seed(7))
    return torch.where(u < 0.5, 1.0, -1.0).double()


@pytest.mark.parametrize("target", TARGETS)
def test_the_compiled_fields_and_log_p_are_the_targets(target):
    model = TARGETS[target]()
    x = states(model, 5)
    fields, log_p = by_hand(model, x)
    assert torch.allclose(model.local_field(x), fields, rtol=0, atol=1e-12)
    assert torch.allclose(model.log_prob(x), log_p, rtol=0, atol=1e-12)
    assert torch.allclose(model.flip_log_ratios(x), -2 * x * fields, rtol=0, atol=1e-12)
    lattice = x.view(5, *model.shape)  # the lattice's layout comes back in its layout
    assert model.local_field(lattice).shape == lattice.shape


def test_the_targets_use_them_on_the_cpu_and_torch_for_a_gradient(monkeypatch):
    model = ising(4, 5, "free", False, 2)
    x = states(model, 3)

    def refuse(*_):
        raise AssertionError("the compiled pass was called")

    monkeypatch.setattr(pairwise_fields, "local_fields", refuse)
    monkeypatch.setattr(pairwise_fields, "log_probs", refuse)
    with pytest.raises(AssertionError, match="compiled pass"):
        model.local_field(x)
    with pytest.raises(AssertionError, match="compiled pass"):
        model.log_prob(x)
    x.requires_grad_(True)
    model.log_prob(x).sum().backward()  # torch's ops: the gradient is the local field
    assert torch.allclose(x.grad, by_hand(model, x.detach())[0], atol=1e-12)


def test_values_do_not_depend_on_whether_the_warm_up_ran():
    """A fresh process, never warmed up, computes exactly what this one does (an experiment's
    workers must give what one process gives)."""
    import json
    import subprocess
    import sys

    model = ising(6, 7, "periodic", True, 8)
    x = states(model, 4)
    code = (
        "import json, torch; from tests.test_pairwise_fields import ising, states; "
        "m = ising(6, 7, 'periodic', True, 8); x = states(m, 4); "
        "print(json.dumps([m.local_field(x).tolist(), m.log_prob(x).tolist()]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    fields, log_p = json.loads(out.stdout)
    assert model.local_field(x).tolist() == fields  # bit for bit
    assert model.log_prob(x).tolist() == log_p
