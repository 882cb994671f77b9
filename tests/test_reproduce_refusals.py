"""``python -m lsbcore.studies.reproduce`` refuses what it cannot do in one sentence (status
2, no traceback) before any run: an ``--out`` or ``--work`` that cannot be written, a
``--from-runs`` file that is too large or is not a runs file, a case listed twice. A write that
fails on a full disk leaves the previous document whole and no partial file."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import pytest

from lsbcore.studies import reproduce
from lsbcore.studies.experiment.runs_file import MAX_BYTES


@pytest.fixture
def no_runs(monkeypatch):
    """Any run fails the test: each refusal must come before the runs."""

    def run(**kwargs):
        pytest.fail("reproduce ran although its arguments are refused")

    monkeypatch.setattr(reproduce, "reproduce", run)


def stored_runs() -> dict:
    """A runs file as ``reproduce`` stores it (case 4, two seeds, every variant; made-up
    numbers), for the refusals to break one entry at a time."""
    config = {"device": "cpu", "size": 8, "chains": 4, "steps": 300, "burn_in": 100}
    config.update(ess_from_step=50, max_lag=100, learning={"lr": 0.01, "hidden": 10})
    by_variant = {}
    for variant, (_, samplers) in reproduce.VARIANTS.items():
        by_variant[variant] = [
            {
                "config": config,
                "wall_seconds": 1.0,
                **{
                    name: {
                        "ess": 10.0 + seed + k,
                        "ess_chain_std": 1.0,
                        "accept": 0.5,
                        "burnin_steps": [5, 7, math.inf, 9],
                        "burnin_evals": [50, 70, math.inf, 90],
                    }
                    for k, name in enumerate(samplers)
                },
            }
            for seed in range(2)
        ]
    return {"runs": {"4": by_variant}, "wall_seconds": 60.0, "seeds": 2, "command": "c"}


def refused(argv: list[str], capsys) -> str:
    """The refusal's stderr; fails unless the command exits with status 2, no traceback."""
    with pytest.raises(SystemExit) as exc:
        reproduce.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    return err.strip().splitlines()[-1]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_stored_runs_file_gives_the_document(tmp_path):
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(stored_runs()))
    doc = tmp_path / "doc.md"
    assert reproduce.main(["--from-runs", str(runs), "--out", str(doc)]) == 0
    assert "## Table 2 under the authors' protocol" in doc.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "where, says",
    [
        ("folder", "is a folder; name a file in it"),
        ("proc", "'/proc' is not writable"),
        ("long name", "is 303 bytes long; a file or folder name holds at most 255"),
        ("link", "is a symbolic link to"),
        ("device", "'/dev/null' is not a regular file"),
    ],
)
def test_an_out_that_cannot_be_written_is_refused_before_any_run(
    where, says, tmp_path, no_runs, capsys
):
    target = tmp_path / "real.md"
    target.write_text("the user's own file")
    out = {
        "folder": tmp_path,
        "proc": Path("/proc/x.md"),
        "long name": tmp_path / ("x" * 300 + ".md"),
        "link": tmp_path / "link.md",
        "device": Path("/dev/null"),
    }[where]
    if where == "link":
        out.symlink_to(target)
    err = refused(["--out", str(out), "--work", str(tmp_path / "work")], capsys)
    assert says in err
    assert target.read_text() == "the user's own file"
    assert where != "link" or out.is_symlink()
    assert not (tmp_path / "work").exists() and leftovers(tmp_path) == []


def test_a_work_folder_that_cannot_be_written_is_refused_before_any_run(tmp_path, no_runs, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    err = refused(["--out", str(tmp_path / "d.md"), "--work", str(blocker / "w")], capsys)
    assert "--work" in err and "is a file, so nothing can be created under it" in err


def test_a_case_listed_twice_is_refused(tmp_path, no_runs, capsys):
    err = refused(["--cases", "1,1,1", "--out", str(tmp_path / "d.md")], capsys)
    assert "--cases lists case 1 more than once" in err


def _without_seeds(tmp_path: Path) -> Path:
    data = stored_runs()
    del data["seeds"]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(data))
    return path


def _with_text(text: str):
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "runs.json"
        path.write_text(text)
        return path

    return make


def _larger_than_the_cap(tmp_path: Path) -> Path:
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate(MAX_BYTES + 1)  # sparse: no disk, and read like zeros
    return path


def _without_a_sampler_field(tmp_path: Path) -> Path:
    data = stored_runs()
    del data["runs"]["4"]["spec"][1]["lsb2"]["burnin_evals"]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "make, says",
    [
        (_with_text('{"runs": []}'), "not a runs file of this command: its 'runs' are not"),
        (_with_text("[1, 2]"), "it holds a JSON list, not an object"),
        (_without_seeds, "it has no 'seeds', a whole number from 2 to 20"),
        (_without_a_sampler_field, "runs['4']['spec'][1]['lsb2'] has no list of numbers"),
        (_with_text("{"), "it is not JSON"),
        (lambda tmp_path: Path("/dev/zero"), "holds more than 50 MB, the most this reads"),
        (_larger_than_the_cap, "holds more than 50 MB, the most this reads"),
        (lambda tmp_path: tmp_path, "it is a folder, not a file"),
    ],
    ids=["runs-list", "json-list", "no-seeds", "no-field", "not-json", "dev-zero", "big", "folder"],
)
def test_a_from_runs_file_that_is_not_a_runs_file_is_refused(make, says, tmp_path, capsys):
    doc = tmp_path / "doc.md"
    err = refused(["--from-runs", str(make(tmp_path)), "--out", str(doc)], capsys)
    assert "--from-runs" in err and says in err
    assert not doc.exists()


def test_a_full_disk_leaves_the_previous_document_whole_and_no_partial_file(
    tmp_path, monkeypatch, capsys
):
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(stored_runs()))
    docs = tmp_path / "docs"
    docs.mkdir()
    previous = docs / "old.md"
    previous.write_text("the previous document")
    written = []
    real_write = os.write

    def disk_fills(fd, data):
        if written:  # the first call writes half of what it is given, the next finds no room
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(real_write(fd, bytes(data)[: len(data) // 2]))
        return written[-1]

    monkeypatch.setattr(os, "write", disk_fills)
    for out, before in ((previous, "the previous document"), (docs / "new.md", None)):
        written.clear()
        assert reproduce.main(["--from-runs", str(runs), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "could not write" in err and "No space left on device".lower() in err.lower()
        assert "it is as it was" in err and "Traceback" not in err
        assert written, "the document was not written through os.write"
        assert (out.read_text() if out.exists() else None) == before
        assert sorted(p.name for p in docs.iterdir()) == ["old.md"]


def test_a_failed_run_is_reported_in_a_sentence_and_writes_no_document(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(reproduce, "experiment", lambda argv: 1)
    doc, work = tmp_path / "d.md", tmp_path / "w"
    assert reproduce.main(["--quick", "--cases", "1", "--out", str(doc), "--work", str(work)]) == 1
    err = capsys.readouterr().err
    assert "error: the experiment failed (1)" in err and "Traceback" not in err
    assert not doc.exists()
