"""The RBM experiment as cells of the sweep (``python -m lsbcore.studies sweep-rbm``): each
(sampler, seed) a Dask cell, the same chains as the in-process run, every finished cell kept and
resumed, and the section written again from a results file under the paper-size model's own
markers."""

import json

import pytest

import lsbcore.studies.rbm.report as report
from lsbcore.rbm.models import save_model
from lsbcore.studies.experiment.cli import main as experiment
from lsbcore.studies.sweep.rbm_cells import CellFile, assemble, grid_of, read_cells
from lsbcore.studies.sweep.rbm_cells import main as sweep_rbm
from lsbcore.targets.rbm import RBM

SAMPLERS = "flsb2,gwg,gibbs-2"
RUN = ["--target", "rbm-digits", "--samplers", SAMPLERS, "--burn-in", "20", "--steps", "40",
       "--chains", "4", "--seeds", "2", "--checkpoints", "6", "--truth-samples", "40",
       "--truth-steps", "10", "--quiet"]  # fmt: skip
DETERMINED = ("ess_dims_mean", "ess_hamming_mean", "ess_bulk_mean", "mixing_evals_per_chain",
              "accept_rate", "hop_distance", "ess_draws")  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory, single_thread):
    """The same protocol run here and as cells on two local Dask workers."""
    folder = tmp_path_factory.mktemp("cells")
    save_model(RBM.random(12, 5, seed=1, scale=0.8), folder / "model.npz")
    base = [*RUN, "--model", str(folder / "model.npz")]
    (folder / "here").mkdir()
    (folder / "sweep").mkdir()
    assert experiment([*base, "--out", str(folder / "here")]) == 0
    cells = folder / "cells.json"
    argv = [*base, "--out", str(folder / "sweep"), "--cells", str(cells), "--workers", "2"]
    assert sweep_rbm(argv) == 0
    here = json.loads((folder / "here" / "results.json").read_text())
    sweep = json.loads((folder / "sweep" / "results.json").read_text())
    return here, sweep, cells, argv, folder


def test_cells_on_the_sweep_run_the_chains_of_the_whole_comparison(runs):
    here, sweep, _, _, _ = runs
    assert [r["seed"] for r in sweep["runs"]] == [0, 1]
    for ours, theirs in zip(here["runs"], sweep["runs"], strict=True):
        assert set(ours["samplers"]) == set(theirs["samplers"]) == set(SAMPLERS.split(","))
        for label, figures in ours["samplers"].items():
            other = theirs["samplers"][label]
            assert other["curve"]["log_mmd"] == figures["curve"]["log_mmd"]
            assert other["curve"]["evals"] == figures["curve"]["evals"]
            for key in DETERMINED:
                assert other[key] == figures[key], (label, key)
    assert sweep["floor"] == here["floor"]


def test_the_results_say_what_the_sweep_took(runs):
    _, sweep, cells, _, _ = runs
    info = sweep["sweep"]
    assert info["cells"] == 6 and info["scheduler"] == "local:2" and info["workers"] == 2
    assert sweep["config"]["command"].startswith("python -m lsbcore.studies sweep-rbm --target")
    stored = read_cells(cells)
    assert len(stored["cells"]) == 6 and stored["failures"] == []
    assert stored["runs"][-1]["status"] == "finished"
    assert info["wall_s"] == pytest.approx(stored["runs"][-1]["wall_s"])
    assert info["cell_seconds"] == pytest.approx(sum(c["wall_s"] for c in stored["cells"].values()))
    workers = {c["worker"] for c in stored["cells"].values()}
    assert 1 <= len(workers) <= 2


def test_a_cells_file_is_resumed_not_overwritten(runs, capsys):
    _, sweep, cells, argv, folder = runs
    before = cells.read_text()
    assert sweep_rbm(argv) == 1  # the file exists and --resume was not given
    assert "exists: pass --resume" in capsys.readouterr().err
    assert cells.read_text() == before
    out = folder / "again"
    out.mkdir()
    resumed = [*(a if a != str(folder / "sweep") else str(out) for a in argv), "--resume"]
    assert sweep_rbm(resumed) == 0  # every cell stored: none runs again
    again = json.loads((out / "results.json").read_text())
    assert again["runs"] == sweep["runs"]
    assert len(read_cells(cells)["runs"]) == 2


def test_assemble_leaves_out_a_seed_missing_a_sampler(runs):
    _, _, cells, _, folder = runs
    data = read_cells(cells)
    grid = grid_of(str(folder / "model.npz"), SAMPLERS.split(","), [0, 1], burn_in=20,
                   steps=40, chains=4, checkpoints=6, truth_samples=40, truth_steps=10,
                   lr=0.01, optimizer="adam")  # fmt: skip
    assert [r["seed"] for r in assemble(data, grid)] == [0, 1]
    dropped = next(c.key for c in grid.cells() if c.seed == 1 and c.label == "gwg")
    del data["cells"][dropped]
    assert [r["seed"] for r in assemble(data, grid)] == [0]


def test_the_section_is_written_again_from_a_results_file(runs, tmp_path):
    _, _, _, _, folder = runs
    doc = tmp_path / "reproduction.md"
    base = ["--target", "rbm-digits", "--quiet", "--docs", str(doc)]
    assert experiment([*base, "--from-results", str(folder / "sweep" / "results.json")]) == 0
    first = doc.read_text()
    assert first.count(report.BEGIN) == 1 and "cells (one sampler and seed each)" in first
    assert experiment([*base, "--from-results", str(folder / "sweep" / "results.json")]) == 0
    assert doc.read_text() == first  # the run's date and commit, not today's


def test_the_paper_size_model_has_a_section_of_its_own(runs, tmp_path):
    _, sweep, _, _, _ = runs
    doc = tmp_path / "reproduction.md"
    report.write_section(doc, report.section(sweep))
    large = dict(sweep, config=dict(sweep["config"], model=report.PAPER_SIZE_MODEL))
    report.write_section(doc, report.section(large))
    report.write_section(doc, report.section(large))  # replaced, not appended
    text = doc.read_text()
    begin, end = report.markers(report.PAPER_SIZE_MODEL)
    assert text.count(report.BEGIN) == text.count(begin) == text.count(end) == 1
    assert text.index(report.END) < text.index(begin)
    large_text = text[text.index(begin) :]
    assert "at the paper's size: 784 x 250" in large_text
    assert "Other data, the same size" in large_text and "A smaller model" not in large_text
    assert "A smaller model" in text[: text.index(begin)]


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "results.json is not JSON (line 1, column 2)"),
        ('{"runs": NaN}', "NaN is not a number a results.json of the RBM experiment may hold"),
        ('{"config": {}}', "it needs config, floor, floor_level, runs, total_seconds"),
        ('{"config": {}, "floor": {}, "floor_level": 0, "runs": [], "total_seconds": 1}',
         "no finished seed"),
    ],
)  # fmt: skip
def test_a_bad_results_file_gets_a_sentence(tmp_path, capsys, content, message):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(SystemExit):
        experiment(["--target", "rbm-digits", "--from-results", str(path)])
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_bad_cells_file_is_refused_in_a_sentence(tmp_path):
    path = tmp_path / "cells.json"
    path.write_text('{"cells": []}')
    with pytest.raises(ValueError, match="cells.json is not a cells file"):
        CellFile(path, resume=True)
    path.write_bytes(b"\xff" * 10)
    with pytest.raises(ValueError, match="cells.json cannot be read: it is not UTF-8 text"):
        CellFile(path, resume=True)
