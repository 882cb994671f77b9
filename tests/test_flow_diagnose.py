"""The flow-exact diagnosis (``lsbcore.studies.flows.diagnose``) on tiny settings: its figures are
consistent with their definitions."""

from __future__ import annotations

import pytest

from lsbcore.studies.flows import diagnose as study

pytestmark = pytest.mark.usefixtures("single_thread")


def test_the_diagnosis_measures_a_bound_below_log_z_and_chains_from_the_flows_draws(capsys):
    d = study.diagnose(size=8, train_steps=30, chains=16, steps=20, seed=0)
    assert d.log_z == pytest.approx(179.23, abs=0.01)  # the 8 x 8 digit, by the transfer matrix
    assert 0 < d.gap < 300  # a lower bound: 30 steps leave it far below log Z (measured 109)
    assert d.log_weight_sd > 0 and d.estimate_own_sd > 0
    assert 0 <= d.acceptance_kept <= 1 and 0 <= d.acceptance_redrawn <= 1
    assert 0 <= d.moved_kept <= 64 and 0 < d.moved_gibbs <= 64
    assert 0 <= d.varied_flow <= 64 and 0 < d.varied_gibbs <= 64 and 0 <= d.marginal_gap <= 1
    assert study.main(["--size", "8", "--train-steps", "5", "--chains", "4", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "log Z 179.23 (exact)" in out and "flow-exact acceptance: estimate kept" in out
    assert "sites that vary among 4,096 states" in out


def test_the_papers_28x28_size_gets_log_z_by_annealed_importance_sampling(monkeypatch, capsys):
    monkeypatch.setattr(study, "AIS_TEMPERATURES", 50)  # the schedule is tested on its own
    monkeypatch.setattr(study, "DRAWS", 64)
    d = study.diagnose(size=28, train_steps=3, chains=4, steps=2, seed=1)
    assert d.seed == 1 and d.log_z_se > 0
    # eta = 2.1 on 784 pixels and a coupling of 1 per edge: log Z well above the fields' part
    assert 784 * 2.1 < d.log_z < 784 * 2.1 + 2 * 1512
    print(study.report(d))
    assert "(AIS, +- " in capsys.readouterr().out
