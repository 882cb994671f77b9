"""Meta-training of the block proposal, the shipped weights, and the held-out KL.

Every statistical claim is checked against the enumerated block conditional.
"""

from __future__ import annotations

import math

import pytest
import torch

from lsbcore.methods.block_proposals import train
from lsbcore.methods.block_proposals.instances import OUT_OF_RANGE, TRAINING, draw_instances
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.proposal import BlockProposal
from lsbcore.methods.block_proposals.sampler import shipped_proposal
from lsbcore.studies.block_proposals import held_out
from lsbcore.studies.block_proposals import train as train_command
from lsbcore.studies.block_proposals.held_out import kl_to_exact

#: The shipped networks' mean held-out KL in range is at most this share of the untrained
#: network's, per block size (measured on these instances: 0.14, 0.27, 0.67).
SHIPPED_FACTOR = {2: 0.25, 3: 0.4, 4: 0.85}


def _held_out(k: int, n: int, family: str | None = None, seed: int = 99) -> torch.Tensor:
    return draw_instances(k, n, torch.Generator().manual_seed(seed), TRAINING, family)


def test_kl_to_exact_is_the_enumerated_sum():
    """KL(p || q) per instance equals the sum over every block state, each scored on its own."""
    proposal = BlockProposal(2, hidden=8, seed=4)
    with torch.no_grad():
        proposal.out.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
    c = _held_out(2, 5)
    motif = GridMotif(2)
    expected = []
    with torch.no_grad():
        for row in c:
            log_p = motif.exact_log_probs(row[None])[0]
            log_q = torch.stack([proposal.log_prob(s[None], row[None])[0] for s in motif.states])
            expected.append(float((log_p.exp() * (log_p - log_q)).sum()))
    got = kl_to_exact(proposal, c)
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64), atol=1e-9)
    assert float(got.max()) > 1e-2  # a KL the check can see


def test_loss_is_an_unbiased_estimate_of_kl_plus_entropy():
    """The training loss (exact samples' -log q) averages to KL(p || q) + H(p), summed exactly."""
    proposal = BlockProposal(2, hidden=8, seed=2)
    with torch.no_grad():
        proposal.out.weight.normal_(0, 0.7, generator=torch.Generator().manual_seed(3))
    c = torch.tensor([[0.4, -0.3, 0.8, 0.1, 0.9, -0.6, 0.5, 0.7, 0.3, -0.4]], dtype=torch.float64)
    log_p = GridMotif(2).exact_log_probs(c)[0]
    entropy = float(-(log_p.exp() * log_p).sum())
    exact = float(kl_to_exact(proposal, c)[0]) + entropy
    with torch.no_grad():
        log_q = proposal.all_log_probs(c)[0]
    assert exact == pytest.approx(float(-(log_p.exp() * log_q).sum()), abs=1e-12)
    draws = 10_000
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        losses = torch.stack([train.nll_loss(proposal, c, generator, draws) for _ in range(10)])
    x = GridMotif(2).exact_samples(c, torch.Generator().manual_seed(1), draws)[0]
    with torch.no_grad():
        spread = float((-proposal.log_prob(x, c.expand(draws, -1))).std())
    error = spread / math.sqrt(draws * len(losses))
    assert abs(float(losses.mean()) - exact) < 4 * error
    assert exact - entropy > 0.02  # the KL part is not negligible: the check sees it


def test_training_lowers_the_held_out_kl():
    """A few dozen steps lower the mean KL to the exact conditional on held-out instances."""
    proposal, losses = train.train(2, steps=60, batch=128, hidden=16, seed=0, family="ising")
    assert len(losses) == 60
    c = _held_out(2, 400, "ising")
    trained = kl_to_exact(proposal, c).mean()
    untrained = kl_to_exact(BlockProposal(2, hidden=16, seed=0), c).mean()
    assert float(trained) < 0.8 * float(untrained)


def test_one_seed_gives_the_same_weights():
    options = dict(steps=4, batch=32, hidden=8, pool=64)
    a, losses_a = train.train(2, seed=5, **options)
    b, losses_b = train.train(2, seed=5, **options)
    c, _ = train.train(2, seed=6, **options)
    assert losses_a == losses_b
    for name, value in a.state_dict().items():
        assert torch.equal(value, b.state_dict()[name]), name
    assert any(not torch.equal(v, c.state_dict()[n]) for n, v in a.state_dict().items())


@pytest.mark.parametrize("k, n", [(2, 400), (3, 100), (4, 6)])
def test_shipped_weights_beat_the_untrained_network_in_range(k, n):
    """The shipped network's mean KL in range (both families) is below SHIPPED_FACTOR times the
    untrained one's: by enumeration for k = 2, 3; for k = 4 estimated on exact samples of the
    enumerated conditional (the same samples for both networks)."""
    proposal = shipped_proposal(k)
    info = proposal.info
    assert info["ranges"] == TRAINING.as_dict()
    assert {"steps", "seed", "final_loss", "seconds", "held_out_kl"} <= set(info)
    c = torch.cat([_held_out(k, n, "ising", seed=7), _held_out(k, n, "network", seed=8)])
    untrained = BlockProposal(k, hidden=proposal.hidden)
    if k < 4:
        trained, before = kl_to_exact(proposal, c), kl_to_exact(untrained, c)
    else:
        trained = held_out.kl_sampled(proposal, c, torch.Generator().manual_seed(1), 400)
        before = held_out.kl_sampled(untrained, c, torch.Generator().manual_seed(1), 400)
    assert float(trained.mean()) < SHIPPED_FACTOR[k] * float(before.mean())


def test_sampled_kl_is_unbiased_for_the_enumerated_kl():
    proposal = BlockProposal(3, hidden=8, seed=1)
    c = _held_out(3, 6, seed=3)
    exact = kl_to_exact(proposal, c)
    estimate = held_out.kl_sampled(proposal, c, torch.Generator().manual_seed(0), 20_000)
    assert float(exact.max()) > 0.05
    assert torch.allclose(estimate, exact, atol=0.02 + 0.05 * float(exact.max()))


def test_out_of_range_variants_leave_training_one_parameter_each():
    assert OUT_OF_RANGE["lambda"].lam[0] > TRAINING.lam[1]
    assert OUT_OF_RANGE["field"].field[0] > TRAINING.field[1]
    assert OUT_OF_RANGE["epsilon"].epsilon[1] < TRAINING.epsilon[0]
    for name, ranges in OUT_OF_RANGE.items():
        changed = [f for f, v in ranges.as_dict().items() if v != TRAINING.as_dict()[f]]
        assert len(changed) == 1, name


@pytest.mark.parametrize(
    "argv, sentence",
    [
        (["--block-size", "5"], "--block-size must be one of (2, 3, 4), got 5."),
        (["--block-size", "2", "--steps", "0"], "--steps must be between 1 and"),
        (["--block-size", "2", "--batch", "-3"], "--batch must be between 1 and"),
        (["--block-size", "2", "--hidden", "9999"], "--hidden must be between 1 and 512"),
    ],
)  # --out: refused by argparse with every command's output flags (tests/test_output_paths.py)
def test_train_command_refuses_bad_flags_in_a_sentence(argv, sentence, capsys):
    assert train_command.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and sentence in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, sentence",
    [
        (["--block-size", "1"], "--block-size must be one of (2, 3, 4), got 1."),
        (["--block-size", "2", "--instances", "0"], "--instances must be between 1"),
        (["--block-size", "2", "--weights", "/no/such.pt"], "no proposal weights at"),
    ],
)
def test_held_out_command_refuses_bad_flags_in_a_sentence(argv, sentence, capsys):
    assert held_out.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and sentence in err


def test_held_out_report_sets_trained_beside_untrained(tmp_path):
    proposal = BlockProposal(2, hidden=8)
    report = held_out.held_out_report(proposal, n=20, sweeps=False)
    assert set(report) == {
        "in range, ising",
        "in range, network",
        "out of range, lambda",
        "out of range, field",
        "out of range, epsilon",
    }
    row = report["in range, ising"]
    # the same network on both sides: the same numbers
    assert row["trained"] == row["untrained"]
    assert len(row["trained"]["kl"]) == 20
    assert row["trained"]["median"] <= row["trained"]["p90"] <= row["trained"]["max"]


def test_held_out_histograms_show_every_setting_trained_over_untrained(tmp_path, capsys):
    proposal = BlockProposal(2, hidden=8)
    report = held_out.held_out_report(proposal, n=12, sweeps=False)
    figure = held_out.kl_histograms(report, 2)
    names = [a.text for a in figure.layout.annotations]
    assert names == list(held_out.HISTOGRAM_SETTINGS)
    assert len(figure.data) == 2 * len(names)
    kls = report["in range, network"]["trained"]["kl"]
    panel = figure.data[2]  # the second setting, trained
    assert panel.name == "trained" and len(panel.x) == len(kls)
    page = tmp_path / "kl.html"
    weights = tmp_path / "q.pt"
    proposal.save(weights)
    argv = ["--block-size", "2", "--weights", str(weights), "--instances", "4", "--no-sweeps"]
    assert held_out.main([*argv, "--html", str(page)]) == 0
    assert "KL(p || q)" in page.read_text()
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as exc:  # before the report is computed
        held_out.main([*argv, "--html", str(tmp_path / "folder")])
    assert exc.value.code == 2 and "is a folder" in capsys.readouterr().err
