"""The block-proposal source's experiments as shipped: the KL results reduced to histogram
counts, the race's verdict by its stated rule and its generated section, the tab's figures
from the shipped files, and a missing or bad file as one sentence."""

from __future__ import annotations

import json

import pytest

from app.views import block_source
from lsbcore.studies.block_proposals import benchmark, block_kl, kl_summary, race

# ----------------------------------------------------------------- the KL summary


def _fake_results():
    cell = lambda d, a, kls: {  # noqa: E731
        "determinism": d,
        "alpha": a,
        **{name: {"kl": kls} for name in kl_summary.PROPOSALS},
    }
    setup = {"block_size": 3, "instances": 5, "train_determinism": 0.5, "train_alpha": 1.0,
             "near_zero": 0.1}  # fmt: skip
    return {
        "setup": setup,
        "cells": [cell(0.5, 1.0, [0.0, 1e-5, 0.05, 0.2, 100.0]), cell(0.8, 1.0, [1.0] * 4)],
    }


def test_the_summary_counts_every_kl_in_its_log10_bin():
    summary = kl_summary.summarise(_fake_results())
    edges = summary["bins"]
    assert edges[0] == -4.0 and edges[-1] == 1.5 and len(edges) == 23
    first = summary["cells"][0]["trained"]
    counts = first["counts"]
    assert sum(counts) == first["n"] == 5
    # 0 and 1e-5 fall below the floor (first bin); 0.05 -> log10 -1.30 in [-1.5, -1.25);
    # 0.2 -> -0.70 in [-0.75, -0.5); 100 -> 2, past the end, in the last bin
    expected = [0] * 22
    expected[0], expected[10], expected[13], expected[21] = 2, 1, 1, 1
    assert counts == expected
    assert first["mean"] == pytest.approx((0.05 + 1e-5 + 0.2 + 100) / 5, abs=1e-6)
    assert first["median"] == 0.05 and first["below"] == 0.6
    # 1.0 -> log10 0 in [0, 0.25): bin 16, all four
    assert summary["cells"][1]["untrained"]["counts"][16] == 4
    assert kl_summary.check_summary(json.loads(json.dumps(summary))) == summary
    # the study's own page draws the same bars from its full results
    figure = block_kl.kl_figure(_fake_results())
    assert [list(t.y) for t in figure.data[:3]] == [expected] * 3


def test_the_shipped_kl_summary_draws_nine_panels_of_three_proposals():
    summary = kl_summary.read_summary(block_source.KL_FILE)
    figure = kl_summary.kl_figure(summary)
    assert len(figure.data) == 9 * 3
    assert {t.name for t in figure.data} == set(kl_summary.PROPOSALS)
    assert all(sum(t.y) == summary["setup"]["instances"] for t in figure.data)
    # the verdicts read from the summary are the study's own words
    lines = block_source.kl_verdicts(summary)
    assert len(lines) == 2 and all(
        any(w in line for w in ("Holds here", "Does not hold here", "Inconclusive here"))
        for line in lines
    )


# ----------------------------------------------------------------- the race


def _row(target, k, role, seconds, tail=-20.0):
    return {
        "target": target, "k": k, "sampler": role, "role": role,
        "seconds_to_95pct": seconds, "evals_to_95pct": None if seconds is None else 1000,
        "tail_mean_log_p": tail, "level": -17.0, "steps_in_budget": 10,
        "curve": {"seconds": [0.0, 0.1, 1.0], "evals": [0, 10, 100], "log_p": [-300, -50, tail]},
    }  # fmt: skip


def _race(*runs):
    """Race figures from ``(target, k, network seconds, {rival role: seconds})``."""
    rows = []
    for target, k, net, rivals in runs:
        rows.append(_row(target, k, "network", net))
        rows += [_row(target, k, role, s) for role, s in rivals.items()]
        rows.append(_row(target, k, "barker", 0.001))  # not a rival in the claim
    return {"seconds": 8.0, "convergence": rows}


GRID = "grid network (16 x 16, determinism 0.9)"
RIVALS = {"gibbs": None, "block-gibbs": None, "exact-tiles": 0.6}


def test_the_race_holds_only_where_the_network_wins_every_grid_run():
    holds = _race((GRID, 4, 0.37, RIVALS), ("paper case 4", 4, 5.0, {"exact-tiles": 0.01}))
    assert race.verdict(holds)[0] == "holds"  # a loss off the grid networks does not count
    lost = _race((GRID, 4, 0.37, RIVALS), (GRID, 3, 0.12, {**RIVALS, "exact-tiles": 0.04}))
    said, evidence = race.verdict(lost)
    assert said == "does not hold" and "at k = 3" in evidence and "(loss)" in evidence
    never = _race((GRID, 4, None, {"gibbs": None, "exact-tiles": 2.0}))
    assert race.verdict(never)[0] == "does not hold"


def test_the_race_is_inconclusive_when_close_or_absent():
    close = _race((GRID, 4, 0.5, {**RIVALS, "exact-tiles": 0.55}))
    assert race.verdict(close)[0] == "inconclusive"
    nobody = _race((GRID, 4, None, {"gibbs": None, "exact-tiles": None}))
    assert race.verdict(nobody)[0] == "inconclusive"
    assert race.verdict(_race(("paper case 4", 4, 0.1, RIVALS)))[0] == "inconclusive"


def test_the_section_states_claim_figures_and_verdict_between_its_markers():
    text = race.section(_race((GRID, 4, 0.37, RIVALS)))
    assert text.startswith(race.BEGIN) and text.rstrip().endswith(race.END)
    assert "**Holds here.**" in text and "| 0.37 / 1,000 |" in text and "never" in text
    assert "about 10 sites" in text and "BENCHMARKS.md" in text
    lost = race.section(_race((GRID, 3, 0.12, {**RIVALS, "exact-tiles": 0.04})))
    assert "**Does not hold here.**" in lost


def test_a_curve_is_thinned_geometrically_keeping_its_ends():
    trace = [(i * 0.001, -float(10_000 - i), i) for i in range(10_001)]
    curve = race.thin(trace, points=50)
    assert curve["seconds"][0] == 0.0 and curve["seconds"][-1] == 10.0
    assert curve["log_p"][-1] == 0.0 and curve["evals"][-1] == 10_000
    assert 40 <= len(curve["seconds"]) <= 52
    assert curve["seconds"] == sorted(curve["seconds"])
    assert curve["seconds"][1] == 0.001  # the first step is kept: early moves stay visible


def test_the_shipped_race_draws_one_line_per_sampler_for_every_run():
    figures = race.read_race(block_source.RACE_FILE)
    runs = race.choices(figures)
    assert runs[0][0].startswith("grid network") and runs[0][1] == max(k for _, k in runs)
    for target, k in runs:
        figure = race.race_figure(figures, target, k)
        samplers = [
            r["sampler"] for r in figures["convergence"] if (r["target"], r["k"]) == (target, k)
        ]
        assert [t.name for t in figure.data] == samplers and len(samplers) >= 5
        assert all(min(t.x) > 0 for t in figure.data)  # a log axis: the start at 0 s is left out
    assert "here" in block_source.race_verdict(figures)


# ----------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("kind", "content", "words"),
    [
        ("race", None, "are not in this copy"),
        ("race", "{not json", "is not JSON"),
        ("race", '{"convergence": [{"target": 1}]}', "convergence row 1 is not a race row"),
        ("race", '{"convergence": [' + "1," * 2_000_000 + "1]}", "more than 2 MB"),
        ("kl", '{"setup": {}, "bins": [0, 1], "cells": [1]}', "does not say its setup"),
        ("kl", "NaN", "NaN is not a number"),
    ],
)
def test_a_missing_or_bad_shipped_file_is_one_sentence(tmp_path, kind, content, words):
    path = tmp_path / "shipped.json"
    if content is not None:
        path.write_text(content)
    results, sentence = block_source.read_asset(kind, path)
    assert results is None and words in sentence
    assert "regenerate them with `python -m lsbcore.studies" in sentence
    assert sentence.count(". ") == 0 and "Traceback" not in sentence


def test_counts_that_do_not_add_up_to_n_are_refused(tmp_path):
    summary = kl_summary.summarise(_fake_results())
    summary["cells"][1]["trained"]["counts"][0] += 1
    path = tmp_path / "block_kl.json"
    path.write_text(json.dumps(summary))
    results, sentence = block_source.read_asset("kl", path)
    assert results is None and "cell 2 is not a cell of the summary" in sentence


def test_the_section_is_rewritten_from_a_figures_file_in_place(tmp_path):
    figures = tmp_path / "race.json"
    figures.write_text(json.dumps(_race((GRID, 4, 0.37, RIVALS))))
    docs = tmp_path / "reproduction.md"
    docs.write_text("# Before\n\n" + race.BEGIN + "\nSTALE TEXT\n" + race.END + "\n\n# After\n")
    assert benchmark.main(["--from-json", str(figures), "--docs", str(docs)]) == 0
    text = docs.read_text()
    assert text.startswith("# Before") and text.rstrip().endswith("# After")
    assert "STALE TEXT" not in text and text.count(race.BEGIN) == 1 and "**Holds here.**" in text
    figures.write_text("[]")
    assert benchmark.main(["--from-json", str(figures), "--docs", str(docs)]) == 2
