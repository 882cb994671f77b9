"""The reproduction document's command: its measures against hand computations, and every
number of a (tiny) generated document against the runs it came from."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import torch

from lsbcore import CSV_COLUMNS
from lsbcore.balancing.functions import NetworkBalancing
from lsbcore.balancing.json_io import balancing_to_json
from lsbcore.studies import reproduce


def test_the_prediction_bound_is_students_t():
    assert reproduce.z_limit(5) == pytest.approx(2.7764, abs=1e-4)
    assert reproduce.z_limit(1000) == pytest.approx(1.9623, abs=1e-3)


def test_z_score_is_the_distance_in_sds_of_one_seed_mean():
    means = [2.0, 2.2, 2.4]
    s = np.std(means, ddof=1)  # 0.2
    expected = (2.9 - 2.2) / (s * math.sqrt(1 + 1 / 3))
    assert reproduce.z_score(2.9, means) == pytest.approx(expected, rel=1e-12)
    assert reproduce.z_score(2.9, [2.0]) is None and reproduce.z_score(1.0, [2.0, 2.0]) is None


def test_collapse_spread_is_zero_for_a_constant_h_and_large_otherwise():
    net = NetworkBalancing(10, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # h = softplus(5 relu(u)) with u = sigmoid(s) - 1/2: not constant
        net.layer1.weight.fill_(1.0)
        net.layer1.bias.zero_()
        net.layer2.weight.fill_(5.0)
    assert reproduce.collapse_spread(balancing_to_json(net)) > 1.0
    with torch.no_grad():
        net.layer2.weight.zero_()  # h = softplus(b2): g = h (1 + t) / 2
    assert reproduce.collapse_spread(balancing_to_json(net)) < 1e-12


def test_burn_in_reach_finds_the_first_record_at_the_mixing_level(tmp_path):
    rows = []
    # chain 0 climbs to its mixing mean (-10) at step 2; chain 1 never gets there in burn-in
    for chain, burn, mixing in ((0, [-30.0, -20.0, -9.0, -8.0], [-11.0, -9.0]),
                                (1, [-50.0, -40.0, -30.0, -20.0], [-5.0, -5.0])):  # fmt: skip
        for step, lp in enumerate(burn):
            rows.append(("min", step, 100 + 5 * step, "burnin", chain, lp))
        for k, lp in enumerate(mixing):
            rows.append(("min", 4 + k, 120 + 5 * k, "mixing", chain, lp))
    path = tmp_path / "traces.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for name, step, evals, phase, chain, lp in rows:
            row = dict.fromkeys(CSV_COLUMNS, "0")
            row.update(sampler=name, step=step, target_evals=evals, phase=phase, chain=chain)
            row["log_p"] = lp
            writer.writerow([row[c] for c in CSV_COLUMNS])
    reach = reproduce.burn_in_reach(path)
    assert reach["min"]["steps"] == [2, math.inf]
    assert reach["min"]["evals"] == [10, math.inf]


def test_every_number_of_a_generated_document_comes_from_its_runs(tmp_path):
    doc, work = tmp_path / "reproduction.md", tmp_path / "work"
    argv = ["--quick", "--cases", "4", "--seeds", "2", "--out", str(doc), "--work", str(work)]
    assert reproduce.main(argv) == 0
    text = doc.read_text(encoding="utf-8")
    for variant in ("authors", "spec"):
        runs = [
            json.loads((work / "case4" / variant / f"seed{k}" / "results.json").read_text())
            for k in range(2)
        ]
        assert not (work / "case4" / variant / "seed0" / "traces.csv").exists()
        for name in ("barker", "lsb2"):
            means = [r["samplers"][name]["ess_paper_mean"] for r in runs]
            chain_std = np.mean([r["samplers"][name]["ess_paper_std"] for r in runs])
            cell = f"{np.mean(means):.2f} ± {chain_std:.2f} [{np.std(means, ddof=1):.2f}]"
            assert cell in text, (variant, name, cell)
        assert runs[0]["config"]["protocol"] == variant
    single = json.loads((work / "case4" / "authors-single" / "seed0" / "results.json").read_text())
    assert single["config"]["burnin_steps_per_iteration"] == {"lsb2": 1}
    objective = work / "case4" / "authors-objective" / "seed1" / "results.json"
    assert json.loads(objective.read_text())["config"]["learning"]["objective"] == "authors"
    assert "python -m lsbcore.studies.reproduce --quick" in text
    assert "## Table 2 under the authors' protocol" in text and "## Burn-in speed" in text
    # the stored runs pass --from-runs' checks and give the same document
    again = tmp_path / "again.md"
    assert (
        reproduce.main(["--from-runs", str(work / "reproduction.json"), "--out", str(again)]) == 0
    )
    assert again.read_text(encoding="utf-8") == text


def test_bad_cases_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        reproduce.main(["--cases", "5", "--out", str(tmp_path / "x.md")])
    assert exc.value.code == 2 and "--cases must be among" in capsys.readouterr().err
