"""Where the flow samplers start: the flow's own draws, unless a start is given."""

import torch

from lsbcore.methods.flows.model import FlowModel
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.ising import IsingPosterior


def _target():
    alpha = torch.linspace(-1.5, 1.5, 16, dtype=torch.float64).reshape(4, 4)
    return IsingPosterior(alpha, 0.5)


def test_flow_exact_starts_from_the_flows_draws_without_a_start():
    target, flow = _target(), FlowModel(16, transforms=2, hidden=8, seed=4)
    sampler = make_sampler("flow-exact", target, 32, seed=9, flow=flow)
    generator = torch.Generator().manual_seed(9)
    target.start(32, generator)  # what the base draws first
    expected, _ = flow.propose(32, 1, generator)
    assert torch.equal(sampler.x.reshape(32, -1), expected.double())
    assert torch.allclose(sampler.log_p, target.log_prob(expected.double()))


def test_a_given_start_is_kept():
    target, flow = _target(), FlowModel(16, transforms=2, hidden=8, seed=4)
    x0 = -torch.ones(4, 4, dtype=torch.float64)
    for name in ("flow-exact", "flow-latent"):
        sampler = make_sampler(name, target, 8, seed=9, flow=flow, x0=x0)
        assert bool((sampler.x == -1).all()), name


def test_the_exact_chain_refuses_the_flow_samplers_in_a_sentence():
    import pytest

    from lsbcore.exact.transition import transition_matrix

    target = IsingPosterior(torch.ones(2, 2, dtype=torch.float64), 0.3)
    for name in ("flow-exact", "flow-latent"):
        with pytest.raises(ValueError, match="no finite transition matrix"):
            transition_matrix(target, name)


def test_the_flow_samplers_refuse_targets_beyond_32_by_32_in_a_sentence():
    import pytest

    from lsbcore.samplers.registry import refusal

    small = IsingPosterior(torch.zeros(32, 32, dtype=torch.float64), 0.3)
    large = IsingPosterior(torch.zeros(33, 32, dtype=torch.float64), 0.3)
    for name in ("flow-exact", "flow-latent"):
        assert refusal(name, small) is None
        assert "at most 1,024 sites" in refusal(name, large)
        with pytest.raises(ValueError, match="32 px"):
            make_sampler(name, large, 2, train_steps=0)


def test_a_saved_flow_loads_to_the_same_densities_and_junk_is_refused_in_a_sentence(tmp_path):
    import pytest

    from lsbcore.methods.flows.model import MAX_WEIGHTS_BYTES, load_flow

    flow = FlowModel(6, transforms=2, hidden=8, seed=3).double()
    path = tmp_path / "flow.pt"
    flow.save(path, info={"target": "a test"})
    again = load_flow(path).double()
    v = torch.randn(5, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.allclose(again.log_r(v), flow.log_r(v))
    assert again.info == {"target": "a test"}
    for source, sentence in [
        (tmp_path / "none.pt", "no flow weights at"),
        (b"not a torch file", "not a flow's weights file"),
        (b"\0" * (MAX_WEIGHTS_BYTES + 1), "flow weights are larger than"),
    ]:
        with pytest.raises(ValueError, match=sentence):
            load_flow(source)
