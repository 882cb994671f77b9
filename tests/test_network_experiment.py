"""The Markov-network experiment (``python -m lsbcore.experiment --target markov-networks``):
its pieces against exact answers, the command end to end on a tiny scale, its refusals, and its
generated section kept by the other commands that write docs/reproduction.md."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch

from lsbcore.balancing.functions import make_balancing
from lsbcore.diagnostics.mixing import ess_paper
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.registry import make_sampler
from lsbcore.studies import reproduce as ising_reproduce
from lsbcore.studies.experiment import cli
from lsbcore.studies.networks import protocol, report
from lsbcore.studies.networks.escape import escape_times, g_at_zero
from lsbcore.studies.networks.experiment import monotone_fit, run_sampler
from lsbcore.studies.rbm import report as rbm_report
from lsbcore.targets.grid_network import grid_network

pytestmark = pytest.mark.usefixtures("single_thread")


# ----------------------------------------------------------------- the pieces
def test_g_at_zero_is_each_functions_limit():
    expected = {"barker": 0.0, "sqrt": 0.0, "min": 0.0, "max": 1.0, "lsb1": 0.25}
    for name, value in expected.items():
        assert g_at_zero(make_balancing(name)) == value  # LSB 1: 1/4 of max(1, t)
    monotone = make_balancing("lsb2-monotone")
    assert g_at_zero(monotone) == monotone.g0()


def test_escape_times_are_the_samplers_own_counts_at_first_entry():
    """The escape of each chain equals what a sampler stepped by hand (same seed, same start)
    shows: its evaluation counter at the first step its state has positive skeleton mass."""
    network = grid_network(4, 0.5, seed=3, epsilon=1e-3)
    skeleton = grid_network(4, 0.5, seed=3, epsilon=0.0)
    found = escape_times(network, skeleton, "sqrt", 6, [4], 300, name="g4")
    sampler = make_sampler(
        "sqrt", network, 6, seed=4, x0=uniform_start(network.shape, 6, 4), backend="torch"
    )
    expected = np.full(6, math.inf)
    inside = torch.isfinite(skeleton.log_prob(sampler.x)).numpy()
    expected[inside] = sampler.n_target_evals
    for _ in range(300):
        sampler.step(1)
        now = torch.isfinite(skeleton.log_prob(sampler.x)).numpy() & ~np.isfinite(expected)
        expected[now] = sampler.n_target_evals
    np.testing.assert_array_equal(found.evaluations, expected)
    assert found.started_inside == int(inside.sum()) and found.escaped > 0
    summary = found.summary()
    assert summary["median"] == np.quantile(expected, 0.5, method="inverted_cdf")
    with pytest.raises(ValueError, match="skeleton must be the same network"):
        escape_times(network, grid_network(3, 0.5, seed=3, epsilon=0.0), "sqrt", 2, [0], 5)
    with pytest.raises(ValueError, match="unknown sampler 'gibbs'"):
        escape_times(network, skeleton, "gibbs", 2, [0], 5)


def test_the_protocol_ess_is_the_paper_ess_of_each_chains_magnetisation():
    """A fixed function's seeds run as one batch: chains i*5..i*5+4 are seed i's. Recomputed by
    hand from the same starts and generator, the per-seed means agree exactly."""
    network = grid_network(4, 0.5, seed=1, epsilon=1e-3)
    seeds, burn_in, steps = [0, 1], 10, 60
    x0 = torch.cat([uniform_start(network.shape, 5, s) for s in seeds])
    settings = {**protocol.AUTHORS, "mixing_start": "own", "lag": 500}
    result = run_sampler(network, "barker", seeds, burn_in, steps, 5, settings, x0)
    sampler = make_sampler("barker", network, 10, seed=0, x0=x0, backend="torch")
    sampler.step(burn_in)
    series = np.empty((10, steps))
    for t in range(steps):
        sampler.step(1)
        series[:, t] = sampler.x.reshape(10, -1).sum(1).numpy()
    ess = ess_paper(series, max_lag=steps - 1)
    assert result["ess_by_seed"] == pytest.approx([ess[:5].mean(), ess[5:].mean()], abs=1e-12)
    assert result["ess_mean"] == pytest.approx(ess.mean(), abs=1e-12)
    assert result["evals_per_chain"] == sampler.n_target_evals and result["g0"] == 0.0


def test_the_monotone_fit_reports_its_own_largest_error():
    fit = monotone_fit(steps=40)
    log_gap = np.abs(np.log(fit["g"]) - np.log(fit["target"]))
    assert np.all(log_gap <= fit["max_log_error"] + 1e-12)  # the points lie in |log t| <= 10
    assert fit["target"] == [max(1.0, t) for t in fit["t"]]


# ----------------------------------------------------------------- the command
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("networks")
    doc = folder / "reproduction.md"
    doc.write_text("# Ising part\n\ntext\n", encoding="utf-8")
    argv = ["--target", "markov-networks", "--quick", "--seeds", "2", "--networks", "mn1",
            "--docs", str(doc), "--json", str(folder / "results.json"), "--quiet"]  # fmt: skip
    assert cli.main(argv) == 0
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return results, doc


def test_the_quick_command_writes_its_section_with_every_number_from_its_runs(tiny_run):
    results, doc = tiny_run
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Ising part\n\ntext\n")
    assert text.count(report.BEGIN) == text.count(report.END) == 1
    assert "`python -m lsbcore.experiment --target markov-networks --quick --seeds 2 " in text
    assert "/tmp" not in text and "results.json" not in text  # no machine paths
    assert "not the competition's files" in text and "a --quick run" in text
    table = results["networks"]["mn1"]
    assert set(table) == {*protocol.SAMPLERS, *protocol.G0_PAIR}
    for name in protocol.SAMPLERS:
        r = table[name]
        assert r["ess_mean"] == pytest.approx(np.mean(r["ess_by_seed"]), abs=1e-12)
        cell = f"| {protocol.LABELS[name]} | {r['ess_mean']:.2f} ± {r['ess_seed_sd']:.2f}"
        assert cell in text, cell
        paper = protocol.PAPER_TABLE3["mn1"].get(name)
        if paper:
            assert f"{paper[0]:.2f} ± {paper[1]:.2f}" in text
    for name in protocol.SAMPLERS:
        e = results["escape"]["mn1"][name]
        assert f"| {protocol.LABELS[name]} | {e['g0']:.3g} | {e['chains']} |" in text
    assert f"the largest error in log g is {results['fit']['max_log_error']:.3g}" in text


def test_the_section_is_rewritten_from_json_in_place(tiny_run, tmp_path):
    results, doc = tiny_run
    copy = tmp_path / "copy.md"
    copy.write_text("# Top\n\n" + doc.read_text(encoding="utf-8") + "\n# After\n")
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    argv = ["--target", "markov-networks", "--from-json", str(path), "--docs", str(copy)]
    assert cli.main(argv + ["--quiet"]) == 0
    again = copy.read_text(encoding="utf-8")
    assert again.count(report.BEGIN) == 1 and again.startswith("# Top")
    assert again.rstrip().endswith("# After")
    assert report.section(results) in again


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seeds", "0"], "--seeds: must be between 1 and 20, got 0"),
        (["--seeds", "two"], "--seeds: expected an integer, got 'two'"),
        (["--networks", "mn3"], "choose networks from mn1, mn2"),
        (["--docs", "notes.txt"], "--docs must name a Markdown file (.md)"),
        (["--docs", "no/such/folder/r.md"], "the folder 'no/such/folder' does not exist"),
        (["--from-json", "no-such.json"], "could not be read as JSON"),
        (["--json", "no/such/folder/r.json"], "the folder 'no/such/folder' does not exist"),
        (["--bogus"], "Unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_are_refused_in_a_sentence(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--target", "markov-networks", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err
    assert "Traceback" not in err and err.strip().endswith(".") and err.count("\n") == 1


def test_an_unknown_target_is_refused_in_a_sentence_that_names_both(capsys):
    assert cli.main(["--target", "markov-network"]) == 2
    err = capsys.readouterr().err
    assert "--target must be rbm-digits or markov-networks, got 'markov-network'." in err


def test_a_bad_results_file_is_refused_in_a_sentence(tmp_path, capsys):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"config": {}}), encoding="utf-8")
    with pytest.raises(SystemExit):
        cli.main(["--target", "markov-networks", "--from-json", str(path)])
    assert "is not a results file of this command" in capsys.readouterr().err


# ----------------------------------------------------------------- sections kept
def test_every_generated_section_is_kept_by_the_other_commands(tiny_run, tmp_path, monkeypatch):
    """The Ising reproduction rewrites its part and keeps the RBM and Markov-network sections;
    the RBM command replaces only its own."""
    results, _ = tiny_run
    network_section = report.section(results)
    rbm_section = f"{rbm_report.BEGIN}\nRBM numbers\n{rbm_report.END}\n"
    doc = tmp_path / "reproduction.md"
    doc.write_text("# Old Ising part\n\n" + rbm_section + "\n" + network_section)
    kept = rbm_report.keep_section(doc.read_text())
    assert kept == rbm_section + "\n" + network_section
    monkeypatch.setattr(ising_reproduce, "reproduce", lambda **kw: {})
    monkeypatch.setattr(ising_reproduce, "document", lambda data, command: "# New Ising part\n")
    work = tmp_path / "work"
    assert ising_reproduce.main(["--quick", "--out", str(doc), "--work", str(work)]) == 0
    text = doc.read_text()
    assert text.startswith("# New Ising part\n") and "Old" not in text
    assert rbm_section in text and network_section in text
    rbm_report.write_section(doc, f"{rbm_report.BEGIN}\nnew RBM\n{rbm_report.END}\n")
    text = doc.read_text()
    assert "new RBM" in text and "RBM numbers" not in text and network_section in text
    report.write_section(doc, network_section)  # and its own rewrite keeps the others
    assert doc.read_text() == text


def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    doc = tmp_path / "reproduction.md"
    doc.write_text("# old\n", encoding="utf-8")

    def interrupted(source, destination):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)  # as the written file is renamed into place
    with pytest.raises(KeyboardInterrupt):
        report.write_section(doc, f"{report.BEGIN}\nnew\n{report.END}\n")
    assert doc.read_text(encoding="utf-8") == "# old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["reproduction.md"]  # no temporary left
