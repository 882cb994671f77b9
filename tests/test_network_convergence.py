"""Figure 5's measurement on the Markov networks (``lsbcore.studies.networks.convergence``): the
convergence-time rule and the verdict rule on synthetic traces with known answers, the
evaluation axis against the samplers' own counts, and the command's ``--only figure5``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lsbcore.networks.presets import preset
from lsbcore.studies.experiment import cli
from lsbcore.studies.networks import convergence, protocol, report
from lsbcore.studies.networks.experiment import build, start_states

pytestmark = pytest.mark.usefixtures("single_thread")
INF = math.inf


# ----------------------------------------------------------------- the rules
def test_a_trace_settles_after_its_last_excursion_from_the_band():
    level, band = 5.0, 1.0
    approach = np.linspace(-20, 4.5, 30)  # enters the band at its last point
    excursion = np.array([5.2, 3.0, 5.5, 5.9])  # leaves once (3.0), then stays
    trace = np.concatenate([approach, excursion, np.full(10, 5.1)])
    # the first index from which every value stays inside: just after the 3.0
    assert convergence.settles(trace, level - band, level + band) == 32
    assert convergence.settles(np.full(5, 5.0), 4.0, 6.0) == 0
    assert convergence.settles(np.array([5.0, 5.0, 7.0]), 4.0, 6.0) is None  # ends outside
    # a trace that reaches the band only by crossing it on the way up counts where it stays
    assert convergence.settles(np.array([0.0, 5.0, 9.0, 5.5, 5.0]), 4.0, 6.0) == 3


def test_quartiles_keep_censored_seeds_infinite_never_nan():
    assert convergence.quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)
    low, med, high = convergence.quartiles([1.0, 2.0, INF, INF, INF])
    assert (low, high) == (2.0, INF) and med == INF


@pytest.mark.parametrize(
    "learned, fixed, expected",
    [
        # LSB 2 converges in far fewer evaluations than every fixed function, seeds apart
        ({"lsb1": [900, 1000, 1100], "lsb2-monotone": [100, 120, 140]},
         {"sqrt": [400, 500, 600], "min": [700, 800, 900]}, "holds"),
        # both learned functions are slower than the best fixed one, seed spreads apart
        ({"lsb1": [900, 1000, 1100], "lsb2-monotone": [800, 850, 950]},
         {"sqrt": [400, 500, 600], "min": [100, 200, 300]}, "does not hold"),
        # one learned function overlaps the best fixed one's seed spread
        ({"lsb1": [900, 1000, 1100], "lsb2-monotone": [350, 450, 700]},
         {"sqrt": [400, 500, 600], "min": [700, 800, 900]}, "inconclusive"),
        # nothing settled: no claim can be judged
        ({"lsb1": [INF] * 3, "lsb2-monotone": [INF] * 3},
         {"sqrt": [INF] * 3, "min": [INF] * 3}, "inconclusive"),
        # only the learned functions settled (every seed): they need fewer evaluations
        ({"lsb1": [500, 600, 700], "lsb2-monotone": [INF] * 3},
         {"sqrt": [INF] * 3, "min": [INF] * 3}, "holds"),
    ],
)  # fmt: skip
def test_the_verdict_compares_seed_quartiles_with_the_best_fixed_function(learned, fixed, expected):
    assert convergence.verdict(learned, fixed) == expected


# ----------------------------------------------------------------- the measurement
@pytest.mark.parametrize("name, per_step", [("sqrt", 1), ("lsb1", 2)])
def test_the_evaluation_axis_is_the_samplers_own_count(name, per_step):
    """A frozen step costs one neighbourhood of evaluations, a learning step two; the trace's
    first point is the start, its chain mean the start's magnetisation."""
    target = preset("mn1")
    x0 = start_states(target.shape, 3, [0], "zeros")
    settings = dict(protocol.AUTHORS)
    make = lambda n, t, x, seed: build(n, t, x, seed, settings)  # noqa: E731
    means, evals = convergence.burn_in_trace(target, name, x0, 0, 20, settings, make)
    assert len(means) == len(evals) == 21
    assert means[0] == -100.0  # every one of the 100 variables at 0 (-1 in +-1 states)
    sampler = make(name, target, x0, 0)
    assert evals[20] == pytest.approx(20 * per_step * sampler.evals_per_step)
    assert np.all(np.diff(evals) > 0)


def test_put_replaces_the_subsection_in_place_or_adds_it_at_the_sections_end():
    doc = f"# Top\n\n{report.BEGIN}\nbody\n{report.END}\n# After\n"
    first = convergence.put(doc, f"{convergence.BEGIN}\none\n{convergence.END}\n", report.END)
    assert first.index(convergence.BEGIN) < first.index(report.END)
    again = convergence.put(first, f"{convergence.BEGIN}\ntwo\n{convergence.END}\n", report.END)
    assert "one" not in again and again.count(convergence.BEGIN) == 1 and "two" in again
    assert again.startswith("# Top") and again.rstrip().endswith("# After")
    with pytest.raises(ValueError):
        convergence.put("# no section\n", "x", report.END)


# ----------------------------------------------------------------- the command
def test_only_figure5_rewrites_just_its_subsection(tmp_path):
    doc = tmp_path / "r.md"
    before = f"# Top\n\n{report.BEGIN}\n## Table 3 part\nkept\n{report.END}\n# After\n"
    doc.write_text(before, encoding="utf-8")
    argv = ["--target", "markov-networks", "--only", "figure5", "--quick", "--seeds", "2",
            "--networks", "mn1", "--docs", str(doc), "--quiet"]  # fmt: skip
    assert cli.main(argv) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.replace(text[text.index(convergence.BEGIN) : text.index(report.END)], "") == before
    assert "**LSB reduces the target evaluations needed to converge**" in text
    assert "| LSB 2 |" in text and "/tmp" not in text


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--from-json", "r.json"], "--only figure5 rewrites its subsection from its own runs"),
        (["--json", "r.json"], "cannot be combined with --from-json or --json"),
        ([], "--only figure5 needs the markov-networks section in --docs"),
        (["--only", "table3"], "Argument --only: invalid choice: 'table3'"),
    ],
)
def test_only_is_refused_in_a_sentence(extra, message, tmp_path, capsys):
    doc = tmp_path / "empty.md"
    doc.write_text("# nothing generated here\n", encoding="utf-8")
    argv = ["--target", "markov-networks", "--docs", str(doc), "--only", "figure5", *extra]
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err, err
    assert "Traceback" not in err and err.strip().endswith(".") and err.count("\n") == 1
