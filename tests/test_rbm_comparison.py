"""RBMComparison: the paper's samplers on one RBM from one shared start, with MMD curves."""

import math

import pytest
import torch

from lsbcore.diagnostics.mmd import log_mmd
from lsbcore.rbm.live import RBMComparison
from lsbcore.rbm.variants import LABELS, VARIANTS, describe, display_name, evals_per_step
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.block.hamming_ball import HammingBallSampler
from lsbcore.targets.rbm import RBM

RBM_12 = RBM.random(12, 5, seed=3, scale=1.0)
TRUTH = RBM_12.gibbs(100, 30, seed=1)


@pytest.fixture(scope="module")
def every_variant(single_thread):
    comparison = RBMComparison(RBM_12, LABELS, n_chains=3, seed=7, truth=TRUTH)
    start = {label: comparison.states(label) for label in LABELS}
    return comparison, start


def test_every_variant_builds_on_an_rbm_from_one_shared_start(every_variant):
    comparison, start = every_variant
    x0 = uniform_start((12,), 3, 7)
    assert comparison.labels == list(LABELS)
    for label in LABELS:
        assert torch.equal(start[label], x0), label
        assert describe(label).endswith(".")
    assert display_name("gibbs-10") == "Gibbs-10" and display_name("hb-10-3") == "HB-10-3"


def test_evaluations_follow_the_counting_rule(every_variant):
    comparison, _ = every_variant
    comparison.record()
    before = {label: comparison.curve(label)["evals"][-1] for label in LABELS}
    comparison.step(4)
    comparison.record()
    for label in LABELS:
        grown = comparison.curve(label)["evals"][-1] - before[label]
        assert grown == 4 * evals_per_step(label, 12), label
    # Table 4: Gibbs-2/4/10 score 4, 16, 1024 states; HB-10-r counts distinct states of the
    # ball (11, 56, 176) where the paper counts 20, 180, 960 (docs/method.md section 9)
    assert [evals_per_step(f"gibbs-{k}", 64) for k in (2, 4, 10)] == [4, 16, 1024]
    assert [evals_per_step(f"hb-10-{r}", 64) for r in (1, 2, 3)] == [11, 56, 176]
    papers = [HammingBallSampler(RBM_12, 1, 10, r).paper_evals_per_step for r in (1, 2, 3)]
    assert papers == [20, 180, 960]


def test_curves_grow_by_one_checkpoint_per_record(every_variant):
    comparison, _ = every_variant
    n = len(comparison.curve("gwg")["step"])
    comparison.step(3)
    comparison.record()
    for label in LABELS:
        curve = comparison.curve(label)
        assert {len(v) for v in curve.values()} == {n + 1}
        assert curve["step"][-1] == comparison.n_steps == curve["step"][-2] + 3
        assert curve["seconds"][-1] >= curve["seconds"][-2]
        assert curve["log_mmd"][-1] == pytest.approx(log_mmd(comparison.states(label), TRUTH))
        hop = comparison.hop_distance(label)
        # sites a step may move: the block, PAS's path (up to 2R - 1 = 5), DMALA all, else 1
        width = VARIANTS[label].options.get("block_size", {"pas": 5, "dmala": 12}.get(label, 1))
        assert 0.0 <= hop <= width, label


def test_learning_happens_in_burn_in_only():
    comparison = RBMComparison(RBM_12, ["flsb1", "lsb1", "gwg"], n_chains=4, seed=0, truth=TRUTH)
    theta0 = comparison.samplers["flsb1"].balancing.theta.detach().clone()
    comparison.record()
    comparison.step(20, learn=True)
    comparison.record()
    theta1 = comparison.samplers["flsb1"].balancing.theta.detach().clone()
    assert not torch.equal(theta0, theta1)
    # a learning step adds the uniform flip: 1 evaluation on gradient ratios, n on exact ones
    grown = {k: comparison.curve(k)["evals"][-1] - comparison.curve(k)["evals"][0]
             for k in comparison.labels}  # fmt: skip
    assert grown == {"flsb1": 20 * 2, "lsb1": 20 * 24, "gwg": 20}
    comparison.start_mixing()
    assert comparison.phase == "mixing" and comparison.burnin_steps == 20
    with pytest.raises(ValueError, match="burn-in"):
        comparison.step(1, learn=True)
    comparison.step(20)
    assert torch.equal(comparison.samplers["flsb1"].balancing.theta, theta1)


def test_a_converged_comparison_reaches_its_noise_floor():
    comparison = RBMComparison(RBM_12, ["gibbs-4"], n_chains=32, seed=0, truth=TRUTH)
    comparison.record()
    comparison.step(300)
    comparison.record()
    floor = comparison.noise_floor
    assert math.isfinite(floor) and comparison.noise_floor == floor
    start, end = comparison.curve("gibbs-4")["log_mmd"]
    assert end < start
    assert end < floor + 0.5


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(labels=[]), "at least one"),
        (dict(labels=["gibbs-3"]), "unknown RBM sampler"),
        (dict(labels=["gwg", "gwg"]), "once"),
        (dict(n_chains=0), "n_chains"),
        (dict(truth=torch.ones(5, 7)), "one column per visible unit"),
    ],
)
def test_bad_arguments_are_refused_in_a_sentence(kwargs, words):
    args = dict(rbm=RBM_12, labels=["gwg"], n_chains=2, truth=TRUTH) | kwargs
    with pytest.raises(ValueError, match=words):
        RBMComparison(**args)


def test_the_variants_are_configured_samplers_of_one_comparison(every_variant):
    from lsbcore.comparison import Comparison
    from lsbcore.samplers.config import SamplerConfig

    comparison, _ = every_variant
    assert isinstance(comparison, Comparison)
    assert VARIANTS["hb-10-2"] == SamplerConfig(
        "hamming-ball", {"block_size": 10, "radius": 2, "blocks": "shuffled"}, label="hb-10-2"
    )
    assert all(VARIANTS[label].key == label for label in LABELS)
    assert comparison.configs == {label: VARIANTS[label] for label in LABELS}
    assert comparison["gibbs-4"].block_size == 4
