"""The block-proposal source's KL experiment (``python -m lsbcore.studies block-kl``): its KL
against a hand enumeration, the context-free proposal against its closed form, the source's
network parameters, the verdicts, a tiny run end to end and its refusals."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.proposal import BlockProposal
from lsbcore.studies.block_proposals import block_kl
from lsbcore.studies.block_proposals.source_networks import source_grid_network

#: The 2 x 2 block's terms as the motif lists them (sites 0 1 / 2 3, row-major): four sites,
#: horizontal (0,1) (2,3), vertical (0,2) (1,3), the anti-diagonal (1,2), the triangle (1,2,3).
TERMS_2X2 = [(0,), (1,), (2,), (3,), (0, 1), (2, 3), (0, 2), (1, 3), (1, 2), (1, 2, 3)]


def hand_log_p(c: list[float]) -> dict:
    """``log p(x | c)`` of every 2 x 2 block state, summed term by term."""
    weights = {
        x: sum(c_s * math.prod(x[i] for i in term) for c_s, term in zip(c, TERMS_2X2, strict=True))
        for x in itertools.product((-1, 1), repeat=4)
    }
    log_z = math.log(sum(math.exp(w) for w in weights.values()))
    return {x: w - log_z for x, w in weights.items()}


def test_the_kl_of_a_network_proposal_matches_a_hand_enumeration_on_a_2x2_block():
    motif = GridMotif(2)
    assert motif.n_terms == len(TERMS_2X2)
    proposal = BlockProposal(2, hidden=8, seed=3).double()  # float64: exact to 1e-9
    with torch.no_grad():  # a correction that is not zero, so q is not the known logits alone
        generator = torch.Generator().manual_seed(5)
        for layer in (proposal.out, proposal.out_context):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator))
    c = torch.tensor([[0.7, -1.2, 0.3, 2.0, 0.9, -0.4, 1.1, 0.2, -0.8, 0.5],
                      [-2.0, 0.1, 1.5, -0.3, 0.0, 2.2, -1.0, 0.6, 0.4, -1.3]],
                     dtype=torch.float64)  # fmt: skip
    got = block_kl.proposal_kls({"net": proposal}, motif, c)["net"]
    for row in range(2):
        log_p = hand_log_p(c[row].tolist())
        kl = 0.0
        for x, lp in log_p.items():
            log_q = float(
                proposal.log_prob(torch.tensor([x], dtype=torch.float64), c[row : row + 1]).detach()
            )
            kl += math.exp(lp) * (lp - log_q)
        assert float(got[row]) == pytest.approx(kl, rel=1e-9, abs=1e-12)
        assert kl > 1e-3  # a real difference, not two zeros agreeing


def test_the_context_free_proposal_is_the_marginal_and_its_kl_has_the_closed_form():
    motif = GridMotif(2)
    h = 0.8
    lone = torch.zeros(1, motif.n_terms, dtype=torch.float64)
    lone[0, 0] = h  # a field on site 0 alone: x_0 = +1 with probability sigmoid(2h)
    s = 1 / (1 + math.exp(-2 * h))

    def bernoulli_kl(a, b):
        return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))

    # fitted on contexts without any pull, it is uniform: KL = log 2 - H(sigmoid(2h))
    uniform = block_kl.context_free(motif, torch.zeros(5, motif.n_terms, dtype=torch.float64))
    kl = block_kl.proposal_kls({"free": uniform}, motif, lone)["free"]
    entropy = -(s * math.log(s) + (1 - s) * math.log(1 - s))
    assert float(kl[0]) == pytest.approx(math.log(2) - entropy, rel=1e-12)
    # fitted on {that context, no pull}: q(x_0 = +1) = (s + 1/2) / 2, the rest uniform
    mixed = block_kl.context_free(motif, torch.cat([lone, torch.zeros_like(lone)]))
    kl = block_kl.proposal_kls({"free": mixed}, motif, lone)["free"]
    assert float(kl[0]) == pytest.approx(bernoulli_kl(s, (s + 0.5) / 2), rel=1e-12)
    assert float(kl[0]) > 0.01


def test_the_source_networks_read_determinism_and_alpha_as_stated():
    def p_one(alpha):
        net = source_grid_network(8, 0.25, alpha, seed=1)
        return [t.exp()[1::2] for t in net.log_tables]

    # alpha = 100: free rows near 1/2, so the near-deterministic variables stand out
    rows = p_one(100.0)
    far = [torch.minimum(p, 1 - p) for p in rows]  # each row's distance to 0 or 1
    deterministic = [bool(((f - 1e-3).abs() < 1e-12).all()) for f in far]
    assert sum(deterministic) == round(0.25 * 64)  # the share of deterministic variables
    free = torch.cat([f for f, d in zip(far, deterministic, strict=True) if not d])
    assert bool((free > 0.3).all())
    # alpha = 0.01: most rows within 0.02 of 0 or 1 (Beta(0.01, 0.01) puts about 3% of its
    # mass between), none past epsilon = 1e-3
    far = torch.cat([torch.minimum(p, 1 - p) for p in p_one(0.01)])
    assert float((far <= 0.02).double().mean()) > 0.85 and bool((far >= 1e-3 - 1e-15).all())


def results_with(training_share: float, free_share: float, other_shares: list[float]) -> dict:
    """A results dict whose trained network has these shares below 0.1 nats."""

    def side(share, mean=0.05):
        return {"mean": mean, "median": 0.05 if share >= 0.5 else 0.5, "p90": 1.0, "below": share}

    cells = []
    shares = iter(other_shares)
    for d in block_kl.DETERMINISMS:
        for a in block_kl.ALPHAS:
            training = (d, a) == (0.5, 1.0)
            share = training_share if training else next(shares)
            cells.append({"determinism": d, "alpha": a, "trained": side(share),
                          "untrained": side(0.0, 1.0),
                          "context-free": side(free_share if training else 0.0, 2.0)})  # fmt: skip
    setup = {"train_determinism": 0.5, "train_alpha": 1.0, "instances": 400}
    return {"setup": setup, "cells": cells}


def test_the_verdicts_follow_the_numbers():
    assert block_kl.near_zero_verdict(results_with(0.9, 0.0, [0.9] * 8))[0] == "holds"
    assert block_kl.near_zero_verdict(results_with(0.3, 0.0, [0.9] * 8))[0] == "does not hold"
    verdict, why = block_kl.near_zero_verdict(results_with(0.9, 0.8, [0.9] * 8))
    assert verdict == "inconclusive" and "ignoring the context" in why
    assert block_kl.generalisation_verdict(results_with(0.9, 0.0, [0.9] * 8))[0] == "holds"
    verdict, why = block_kl.generalisation_verdict(results_with(0.9, 0, [0.9] * 6 + [0.1] * 2))
    assert verdict == "inconclusive" and "6 of the 8" in why
    worst = results_with(0.9, 0.0, [0.9] * 3 + [0.1] * 5)
    assert block_kl.generalisation_verdict(worst)[0] == "does not hold"
    # 400 instances: two standard errors are 5 points, so 48% is no verdict, 40% is one
    verdict, why = block_kl.near_zero_verdict(results_with(0.48, 0.0, [0.9] * 8))
    assert verdict == "inconclusive" and "two standard errors" in why
    assert block_kl.near_zero_verdict(results_with(0.4, 0.0, [0.9] * 8))[0] == "does not hold"
    assert block_kl.majority(0.56, 400) == "yes" and block_kl.majority(0.54, 400) == "unclear"


def test_a_tiny_run_writes_its_numbers_figure_and_section_with_both_verdicts(tmp_path, capsys):
    docs, out, page = tmp_path / "reproduction.md", tmp_path / "kl.json", tmp_path / "kl.html"
    docs.write_text("# Reproduction\n\nearlier text\n", encoding="utf-8")
    argv = ["--block-size", "2", "--instances", "6", "--steps", "3", "--train-size", "32",
            "--json", str(out), "--html", str(page), "--docs", str(docs)]  # fmt: skip
    assert block_kl.main(argv) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert len(results["cells"]) == 9
    for cell in results["cells"]:
        for name in block_kl.PROPOSALS:
            kl = torch.tensor(cell[name]["kl"])
            assert len(kl) == 6 and bool((kl >= 0).all())
            assert cell[name]["below"] == pytest.approx(float((kl < 0.1).double().mean()))
    text = docs.read_text(encoding="utf-8")
    assert text.startswith("# Reproduction\n\nearlier text\n") and block_kl.END in text
    verdicts = ("**Holds here.**", "**Does not hold here.**", "**Inconclusive here.**")
    for claim in block_kl.CLAIMS:
        line = next(line for line in text.splitlines() if line.startswith(f"- {claim}"))
        assert sum(v in line for v in verdicts) == 1
    assert "--json" not in text and "--docs reproduction.md" in text
    assert "plotly" in page.read_text(encoding="utf-8")
    # a second write replaces the section, it does not add one
    block_kl.replace_section(docs, block_kl.section(results), block_kl.BEGIN, block_kl.END)
    assert docs.read_text(encoding="utf-8").count("<!-- block-kl:begin") == 1


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--instances", "0"], "--instances: must be between 1 and 100,000, got 0"),
        (["--train-alpha", "0"], "--train-alpha: must be in [0.01, 100], got 0"),
        (["--train-determinism", "1.5"], "--train-determinism: must be in [0, 1], got 1.5"),
        (["--block-size", "4"], "--block-size: invalid choice: 4"),
    ],
)
def test_bad_arguments_are_refused_in_one_sentence(argv, named, capsys):
    with pytest.raises(SystemExit) as done:
        block_kl.main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
