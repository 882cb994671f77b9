"""Weights files (flows and block proposals): one reader checks the shape a file claims against
the bytes it holds before any model is built, and refuses non-finite weights, in sentences."""

from __future__ import annotations

import pytest
import torch

from lsbcore.methods.block_proposals import proposal as proposal_module
from lsbcore.methods.block_proposals.proposal import BlockProposal, load_proposal
from lsbcore.methods.flows import model as flow_module
from lsbcore.methods.flows.model import FlowModel, load_flow


@pytest.mark.parametrize(("n", "transforms", "hidden"), [(2, 1, 2), (5, 3, 7), (16, 4, 64)])
def test_a_flows_weights_are_counted_from_its_shape_as_built(n, transforms, hidden):
    built = FlowModel(n, transforms=transforms, hidden=hidden)
    assert flow_module.parameter_count(n, transforms, hidden) == sum(
        p.numel() for p in built.parameters()
    )


@pytest.mark.parametrize(("k", "hidden", "depth"), [(2, 1, 1), (3, 7, 2), (4, 64, 4)])
def test_a_proposals_weights_are_counted_from_its_shape_as_built(k, hidden, depth):
    built = BlockProposal(k, hidden=hidden, depth=depth)
    assert proposal_module.parameter_count(k, hidden, depth) == sum(
        p.numel() for p in built.parameters()
    )


def test_a_flow_file_claiming_a_shape_its_bytes_cannot_hold_is_refused_before_building(
    tmp_path, monkeypatch
):
    """Issue 47: a 1.3 kB file whose shape claims a large flow was built (272 MB, and 13 GB at
    the largest shape allowed) before its weights were read."""
    built = []
    monkeypatch.setattr(flow_module, "FlowModel", lambda **shape: built.append(shape))
    path = tmp_path / "claims.pt"
    shape = dict(n_sites=256, transforms=2, hidden=64, seed=0)
    torch.save({"shape": shape, "state": {}, "info": {}}, path)
    held = path.stat().st_size
    needed = 4 * flow_module.parameter_count(**shape)
    with pytest.raises(ValueError) as refused:
        load_flow(path)
    assert str(refused.value) == (
        "claims.pt is not a flow's weights file: its shape (n_sites 256, transforms 2, hidden 64, "
        f"seed 0) needs {needed / 1e3:.1f} kB of weights, but the file holds {held / 1e3:.1f} kB."
    )
    assert built == []
    with pytest.raises(ValueError, match="^the file is not a flow's weights file"):
        load_flow(path.read_bytes())


def test_a_flow_with_a_non_finite_weight_is_refused_and_a_sound_one_loads(tmp_path):
    flow = FlowModel(6, transforms=2, hidden=8, seed=1)
    flow.save(tmp_path / "sound.pt")
    assert isinstance(load_flow(tmp_path / "sound.pt"), FlowModel)
    with torch.no_grad():
        next(flow.latent.parameters())[0] = float("inf")
    flow.save(tmp_path / "inf.pt")
    with pytest.raises(ValueError, match=r"^inf\.pt is refused: its weights are not all finite"):
        load_flow(tmp_path / "inf.pt")


def test_a_proposal_file_claiming_more_weights_than_it_holds_is_refused(tmp_path):
    path = tmp_path / "claims.pt"
    torch.save({"shape": {"k": 4, "hidden": 512, "depth": 4}, "state": {}, "info": {}}, path)
    with pytest.raises(
        ValueError,
        match=r"^claims\.pt is not a block proposal's weights file: "
        r"its shape \(k 4, hidden 512, depth 4\) needs [\d.]+ MB of weights",
    ):
        load_proposal(path)
