"""The discretised Gaussian mixture (the flow paper's Figure 1) against exact answers: its log p~
against a plain loop over cells and scipy's densities, the Gray code's one-flip neighbours, flip
ratios against differences, registry samplers against the enumerated law, bad inputs refused in
a sentence, and the study's quick run, verdicts and section."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from lsbcore import make_sampler
from lsbcore.exact import all_states
from lsbcore.methods.flows.train import trained_flow
from lsbcore.studies import discretised_mixture as study
from lsbcore.targets.discretised_mixture import DiscretisedMixture, Mixture, random_mixture


def plain_log_prob(mixture: Mixture, state, bits: int, half_width: float, code: str) -> float:
    """``log p~`` of one state by the definition, one coordinate and one component at a time."""
    centre = []
    for c in range(2):
        word = sum(1 << j for j in range(bits) if state[c * bits + j] > 0)
        level = word
        if code == "gray":  # Gray to binary: XOR of every right shift
            shift = word >> 1
            while shift:
                level ^= shift
                shift >>= 1
        centre.append(-half_width + (level + 0.5) * 2 * half_width / 2**bits)
    density = sum(
        w * stats.multivariate_normal(m, s).pdf(centre)
        for w, m, s in zip(mixture.weights, mixture.means, mixture.covariances, strict=True)
    )
    return math.log(density)


@pytest.mark.parametrize(("bits", "half_width", "code"), [(6, 4.0, "gray"), (3, 2.5, "binary")])
def test_log_prob_is_the_mixture_density_at_the_cell_centre(bits, half_width, code):
    mixture = random_mixture(1)
    target = DiscretisedMixture(mixture, bits=bits, half_width=half_width, code=code)
    x = all_states(2 * bits)[:: 7 if bits == 6 else 1]
    got = target.log_prob(x).numpy()
    want = [plain_log_prob(mixture, row.numpy(), bits, half_width, code) for row in x]
    assert np.abs(got - want).max() < 1e-9
    assert np.ptp(want) > 5  # the states differ: the check has power


def test_gray_neighbours_are_one_flip_apart_and_binary_ones_may_not_be():
    gray = DiscretisedMixture(random_mixture(0))
    binary = DiscretisedMixture(random_mixture(0), code="binary")
    levels = torch.stack([torch.arange(63), torch.full((63,), 5)], 1)
    for target, most in ((gray, 1), (binary, 6)):
        a, b = target.states_of(levels), target.states_of(levels + torch.tensor([1, 0]))
        flips = (a != b).sum(1)
        assert int(flips.min()) == 1 and int(flips.max()) == most
        assert torch.equal(target.levels_of(a).long(), levels)  # states_of inverts levels_of


def test_flip_ratios_are_the_log_prob_differences():
    target = DiscretisedMixture(random_mixture(2))
    x = target.start(5, torch.Generator().manual_seed(0))
    s = target.flip_log_ratios(x)
    for i in range(target.n_sites):
        flipped = x.clone()
        flipped[:, i] *= -1
        assert torch.allclose(s[:, i], target.log_prob(flipped) - target.log_prob(x), atol=1e-10)


def _reaches(exact, target, sampler, burn_in, thin, draws):
    pi = exact.exact_posterior(target)
    counts = exact.histogram(sampler, burn_in, thin, draws)
    assert exact.tv(pi, counts) < exact.tv_threshold(pi, sampler.n_chains * draws)
    assert pi.max() < 0.1  # many states carry mass: the check has power


@pytest.mark.parametrize("name", ["gibbs", "barker", "bit-flip-mh"])
def test_registry_samplers_reach_the_enumerated_law(name, exact, single_thread):
    target = DiscretisedMixture(random_mixture(3), bits=4)  # 256 states: a tight floor
    sampler = make_sampler(name, target, 600, seed=5)
    _reaches(exact, target, sampler, 100, 5, 40)


def test_flow_exact_with_a_briefly_trained_flow_reaches_the_enumerated_law(exact, single_thread):
    target = DiscretisedMixture(random_mixture(3), bits=4)
    flow = trained_flow(target, 100, seed=1, transforms=2, hidden=32)
    # K = 8 importance draws: with K = 1 the pseudo-marginal chains stick where the flow's mass
    # was underestimated and need far longer runs to reach the floor
    sampler = make_sampler("flow-exact", target, 400, seed=5, flow=flow, importance=8)
    _reaches(exact, target, sampler, 30, 8, 30)


def test_gradient_samplers_are_refused_in_a_sentence():
    with pytest.raises(ValueError, match="gradient"):
        make_sampler("gwg", DiscretisedMixture(random_mixture(0)), 2)


GOOD = random_mixture(0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mixture": "gmm"}, "mixture must be a Mixture, got str."),
        ({"bits": 0}, "bits must be"),
        ({"half_width": 0.0}, "half_width must be a positive number"),
        ({"code": "hex"}, "code must be one of ('gray', 'binary')"),
        ({"mixture": Mixture(GOOD.weights * 2, GOOD.means, GOOD.covariances)},
         "weights must be positive and sum to 1"),
        ({"mixture": Mixture(GOOD.weights, GOOD.means[:3], GOOD.covariances)},
         "means must have shape (5, 2)"),
        ({"mixture": Mixture(GOOD.weights, GOOD.means, -GOOD.covariances)},
         "covariances must be positive definite"),
        ({"mixture": Mixture(GOOD.weights, GOOD.means * np.nan, GOOD.covariances)},
         "means must be finite"),
    ],
)  # fmt: skip
def test_bad_inputs_are_refused_in_a_sentence(kwargs, message):
    with pytest.raises(ValueError, match="^.*\\.$") as err:
        DiscretisedMixture(**({"mixture": GOOD} | kwargs))
    assert message in str(err.value)


def test_bad_states_and_levels_are_refused():
    target = DiscretisedMixture(GOOD, bits=3)
    with pytest.raises(ValueError, match="x must have shape"):
        target.log_prob(torch.ones(2, 7, dtype=torch.float64))
    with pytest.raises(ValueError, match="levels must be integers from 0 to 7"):
        target.states_of([[0, 8]])


def test_the_generator_is_seeded_and_its_modes_are_separated():
    a, b = random_mixture(4), random_mixture(4)
    assert np.array_equal(a.means, b.means) and np.array_equal(a.weights, b.weights)
    assert not np.array_equal(a.means, random_mixture(5).means)
    gaps = [np.hypot(*(p - q)) for i, p in enumerate(a.means) for q in a.means[i + 1 :]]
    assert min(gaps) >= 0.45 * 4.0 and abs(a.weights.sum() - 1) < 1e-12
    assert np.abs(a.means).max() <= 0.7 * 4.0


def test_the_quick_study_writes_rows_a_figure_and_a_section(tmp_path, capsys):
    rows, png, doc = tmp_path / "rows.json", tmp_path / "fig.png", tmp_path / "doc.md"
    doc.write_text("# Title\n\nkept\n")
    args = ["--quick", "--json", str(rows), "--figure", str(png), "--docs", str(doc)]
    assert study.main(args) == 0
    printed = capsys.readouterr().out
    got = json.loads(rows.read_text())["rows"]
    runs = [(r["sampler"], r["budget"]) for r in got]
    assert runs[:2] == [("flow draws", "draws"), ("flow-exact", "steps")]
    assert ("barker", "evaluations") in runs and ("dhmc", "evaluations") in runs
    for r in got:
        assert 0 < r["tv"] <= 1 and 0 < r["floor"] <= 1 and r["draws"] > 0
        assert r["sampler"] in printed
    # the same-evaluations runs stop at flow-exact's evaluations, not at its steps
    barker = next(r for r in got if r["sampler"] == "barker" and r["budget"] == "evaluations")
    assert barker["steps"] < study.QUICK.steps and barker["evaluations"] >= study.QUICK.steps
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert study.main(args) == 0  # again: the section is replaced, not appended
    written = doc.read_text()
    assert written.startswith("# Title\n\nkept\n") and written.count(study.BEGIN) == 1


def _row(mixture, sampler, tv, floor=0.05, sd=0.001):
    return study.Row(mixture, sampler, "steps", 10, 10, 1000, tv, floor, sd, 0.02, 1.0)


def test_the_verdicts_need_every_mixture():
    flow = [_row(0, "flow draws", 0.3), _row(1, "flow draws", 0.2)]
    exact = [_row(0, "flow-exact", 0.052), _row(1, "flow-exact", 0.051)]
    (_, rough, _), (_, same, evidence) = study.verdicts(flow + exact)
    assert (rough, same) == ("holds", "holds")
    assert "mixture 0: 0.052 against a floor of 0.050 ± 0.001" in evidence
    mixed = [_row(0, "flow-exact", 0.052), _row(1, "flow-exact", 0.06)]  # 0.06 > 0.05 + 3 s.d.
    assert study.verdicts(mixed)[0][1] == "inconclusive"
    far = [_row(0, "flow draws", 0.7), _row(1, "flow draws", 0.05)]  # too rough; exact
    assert study.verdicts(far)[0][1] == "does not hold"
    text = study.section(flow + exact + [_row(0, "gibbs", 0.05)], study.QUICK, 60.0)
    assert "**Holds here.** Flow-exact (K = 1)'s TV is within the floor" in text
    # with K = 8 beside it, the better of the two speaks, the other is named
    eight = [_row(0, study.FLOW_K8, 0.2), _row(1, study.FLOW_K8, 0.3)]
    (_, _, _), (_, same, evidence) = study.verdicts(flow + exact + eight)
    assert same == "holds" and "with K = 8: 0 of 2" in evidence
    (_, _, _), (_, same, evidence) = study.verdicts(flow + far[1:] + eight + mixed)
    assert same == "inconclusive" and evidence.startswith("flow-exact (K = 1)")
    assert "by the same protocol: `gibbs` (same steps)" in text
