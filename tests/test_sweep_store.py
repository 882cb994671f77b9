"""The sweep's SQLite results file: every field read back as written, a cell stored once,
resume and its refusal, files that are not results files refused in a sentence, a crash that
keeps every committed cell, and reading while the sweep still writes."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hostile_files import endless_view_file

from lsbcore.studies.sweep.cell import RESULT_FIELDS
from lsbcore.studies.sweep.grid import Cell, Protocol, SweepGrid
from lsbcore.studies.sweep.store import CELL_COLUMNS, ResultStore, StoreError, read_results

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = Protocol(size=8, chains=2, burn_in=10, steps=20, max_lag=5)


def cell(i: int = 0, sampler: str = "barker", seed: int = 0) -> Cell:
    return Cell("square", 0.25 * i, 1.0, 2.0, sampler, seed, PROTOCOL)


def result(i: int = 0) -> dict:
    """A made-up result with a distinct value in every field."""
    return {
        "ess": 10.5 + i,
        "ess_bulk": 11.25 + i,
        "rhat": 1.01,
        "evals": 2000.0 + i,
        "ess_per_kevals": (10.5 + i) / (2.0 + i / 1000),
        "accept_rate": 0.75,
        "seconds": 0.125,
        "wall_s": 0.5,
        "notes": f"note {i}",
        "worker": f"host:{100 + i}",
    }


def grid() -> SweepGrid:
    return SweepGrid(lam=(0.0,), samplers=("barker",), protocol=PROTOCOL)


def test_every_field_reads_back_as_written(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start_run(grid(), "local", 2)
        c = Cell("horse", 1.5, -1.0, 0.5, "sqrt", 7, PROTOCOL)
        assert store.write(c, result(3)) is True
    assert set(result(3)) == set(RESULT_FIELDS)  # every result field is checked below
    (row,) = read_results(path)
    assert set(row) == set(CELL_COLUMNS)
    assert row["key"] == c.key
    for name, value in c.as_dict().items():
        assert row[name] == value and type(row[name]) is type(value), name
    for name, value in result(3).items():
        assert row[name] == value, name
    assert row["run"] == run
    assert row["finished"].endswith("Z") and row["finished"][:2] == "20"


def test_a_missing_number_is_stored_as_null_and_read_as_nan(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        store.write(cell(), {**result(), "ess": math.nan, "rhat": None})
    (row,) = read_results(path)
    assert math.isnan(row["ess"]) and math.isnan(row["rhat"])
    assert row["ess_bulk"] == result()["ess_bulk"]


def test_a_cell_written_twice_is_stored_once_with_its_first_result(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        assert store.write(cell(1), result(1)) is True
        assert store.write(cell(1), result(2)) is False
        assert store.write(cell(2), result(2)) is True
        assert store.done_keys() == {cell(1).key, cell(2).key}
    rows = read_results(path)
    assert len(rows) == 2
    first = next(r for r in rows if r["key"] == cell(1).key)
    assert first["ess"] == result(1)["ess"]


def test_a_file_with_results_needs_resume_and_resume_sees_what_is_done(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        store.start_run(grid(), "local", 1)
        store.write(cell(0), result(0))
        store.write(cell(1), result(1))
        store.end_run("interrupted")
    with pytest.raises(StoreError) as err:
        ResultStore(path)
    assert "already holds 2 finished cells" in str(err.value)
    assert "--resume" in str(err.value)
    with ResultStore(path, resume=True) as store:
        assert store.done_keys() == {cell(0).key, cell(1).key}
        second = store.start_run(grid(), "tcp://host:8786", 4)
        store.write(cell(2), result(2))
        store.end_run("finished")
    runs = sqlite3.connect(path).execute("SELECT run, scheduler, workers, status FROM runs")
    assert runs.fetchall() == [
        (1, "local", 1, "interrupted"),
        (second, "tcp://host:8786", 4, "finished"),
    ]
    assert len(read_results(path)) == 3


def test_an_empty_results_file_opens_without_resume(tmp_path):
    path = tmp_path / "r.sqlite"
    ResultStore(path).close()  # created, no cell finished
    with ResultStore(path) as store:
        assert store.done_keys() == set()
    assert read_results(path) == []


def test_a_failure_is_recorded_and_does_not_count_as_done(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        store.start_run(grid(), "local", 1)
        store.write_failure(cell(0), "worker died " + "x" * 5000)
        assert store.done_keys() == set()
    (key, run, error, _) = sqlite3.connect(path).execute("SELECT * FROM failures").fetchone()
    assert key == cell(0).key and run == 1 and len(error) == 2000


def _foreign_sqlite(path: Path, table: str = "notes (a)") -> Path:
    db = sqlite3.connect(path)
    db.execute(f"CREATE TABLE {table}")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("opener", [read_results, ResultStore])
def test_a_file_that_is_not_sqlite_or_a_folder_is_refused_in_a_sentence(tmp_path, opener):
    text = tmp_path / "results.sqlite"
    text.write_text("key,ess\nsquare,1.0\n", encoding="utf-8")
    with pytest.raises(StoreError, match="is not a sweep's results file"):
        opener(text)
    assert text.read_text(encoding="utf-8") == "key,ess\nsquare,1.0\n"  # left as it was
    with pytest.raises(StoreError, match="is not a file"):
        opener(tmp_path)


def test_reading_an_sqlite_file_without_the_cells_table_is_refused(tmp_path):
    path = _foreign_sqlite(tmp_path / "other.sqlite")
    with pytest.raises(StoreError) as err:
        read_results(path)
    assert "is not a sweep's results file" in str(err.value)
    with pytest.raises(StoreError, match="is not a file"):
        read_results(tmp_path / "missing.sqlite")


def test_a_cells_table_lacking_columns_is_refused_when_reading_and_writing(tmp_path):
    path = _foreign_sqlite(tmp_path / "old.sqlite", "cells (key TEXT PRIMARY KEY, ess REAL)")
    for opener in (read_results, ResultStore):
        with pytest.raises(StoreError, match="its cells table lacks target"):
            opener(path)


def test_a_results_file_of_another_schema_version_is_refused_for_writing(tmp_path):
    path = tmp_path / "r.sqlite"
    ResultStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '2' WHERE name = 'schema'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"another version of the sweep \(schema 2\)"):
        ResultStore(path, resume=True)


def test_writing_into_an_sqlite_file_of_another_program_is_refused_and_leaves_it_alone(
    tmp_path,
):
    path = _foreign_sqlite(tmp_path / "other.sqlite")
    with pytest.raises(StoreError):
        ResultStore(path).close()
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert tables == {"notes"}


def test_an_sqlite_file_with_another_meta_table_is_refused_in_a_sentence(tmp_path):
    path = _foreign_sqlite(tmp_path / "other.sqlite", "meta (a, b)")
    with pytest.raises(StoreError):
        ResultStore(path).close()


CRASH = textwrap.dedent(
    """
    import os, sys
    from lsbcore.studies.sweep.grid import Cell, Protocol
    from lsbcore.studies.sweep.store import ResultStore
    protocol = Protocol(**{json_protocol})
    store = ResultStore(sys.argv[1])
    for i in range(5):
        cell = Cell("square", 0.25 * i, 1.0, 2.0, "barker", 0, protocol)
        store.write(cell, {{"ess": float(i), "ess_per_kevals": 1.0 + i, "notes": "n"}})
    # a sixth cell begun and never committed: the process dies inside the transaction
    store.db.execute("INSERT INTO cells (key, target) VALUES ('half', 'square')")
    print("written", flush=True)
    os._exit(9)
    """
)


def test_a_sweep_killed_mid_write_leaves_every_committed_cell_readable(tmp_path):
    path = tmp_path / "r.sqlite"
    script = CRASH.format(json_protocol=json.dumps(dataclasses.asdict(PROTOCOL)))
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 9 and "written" in done.stdout, done.stderr
    rows = read_results(path)
    assert sorted(r["ess_per_kevals"] for r in rows) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert "half" not in {r["key"] for r in rows}
    # and the next sweep resumes from it, seeing the five
    with ResultStore(path, resume=True) as store:
        assert len(store.done_keys()) == 5


def test_results_are_read_while_a_sweep_holds_the_file_open_and_mid_transaction(tmp_path):
    path = tmp_path / "r.sqlite"
    store = ResultStore(path)
    try:
        store.start_run(grid(), "local", 1)
        store.write(cell(0), result(0))
        store.write(cell(1), result(1))
        assert len(read_results(path)) == 2
        store.write(cell(2), result(2))
        assert {r["key"] for r in read_results(path)} == {cell(i).key for i in range(3)}
        # the writer inside an open transaction: the reader is not blocked, sees committed cells
        store.db.execute("INSERT INTO cells (key, target) VALUES ('pending', 'square')")
        assert len(read_results(path)) == 3
        store.db.commit()
        assert len(read_results(path)) == 4
    finally:
        store.close()


# ----------------------------------------------------------------------------- hostile files
def test_a_results_file_whose_cells_is_an_endless_view_is_refused_at_once(tmp_path):
    path = endless_view_file(tmp_path / "endless.sqlite")
    with pytest.raises(StoreError, match="its cells is a view, not a plain table"):
        read_results(path)
    with pytest.raises(StoreError, match="its cells is a view, not a plain table"):
        ResultStore(path, resume=True)  # --resume --out FILE hung on it


def test_the_report_command_refuses_the_endless_view_in_a_sentence(tmp_path):
    path = endless_view_file(tmp_path / "endless.sqlite")
    done = subprocess.run(
        [sys.executable, "-m", "lsbcore.studies.sweep.report", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "not a plain table" in done.stderr and "Traceback" not in done.stderr


def test_reading_is_bounded_in_rows_and_in_time(tmp_path):
    path = tmp_path / "results.sqlite"
    with ResultStore(path) as store:
        store.start_run(grid(), "local", 1)
        for i in range(30):
            store.write(cell(i), result(i))
    assert len(read_results(path)) == 30
    with pytest.raises(StoreError, match="holds more than 10 cells"):
        read_results(path, max_rows=10)
    with pytest.raises(StoreError, match="took more than 0 s to read"):
        read_results(path, seconds=0.0)
