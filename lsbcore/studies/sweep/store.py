"""Where a sweep's results live: one SQLite file (``ResultStore``).

Why SQLite and not a Parquet file per cell: a cell's result is a dozen numbers, so a sweep of a
million cells is a few hundred MB in one file, against a million files (and a manifest to keep
true) the other way; SQLite ships with Python (no dependency); every write is a transaction, so
a killed sweep leaves every finished cell whole and none half-written; and the key column is the
table's primary key, so a cell can never be stored twice. Only the sweep's client writes (the
workers return their results to it), so one writer is all SQLite has to serve.

Tables: ``cells`` (one row per finished cell: its parameters, ``RESULT_FIELDS``, which run
wrote it and when), ``failures`` (a cell's error, per attempt that raised), ``runs`` (each
invocation: grid, scheduler, workers, start, end, how it ended).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from lsbcore.studies.sweep.cell import RESULT_FIELDS
from lsbcore.studies.sweep.grid import Cell, SweepGrid

__all__ = [
    "CELL_COLUMNS",
    "MAX_ROWS",
    "MAX_STORE_BYTES",
    "READ_SECONDS",
    "ResultStore",
    "StoreError",
    "read_results",
]

SCHEMA_VERSION = 1
CELL_COLUMNS = (
    "key", "target", "lam", "mu", "sigma", "sampler", "seed",
    "size", "chains", "burn_in", "steps", "max_lag",
    *RESULT_FIELDS,
    "run", "finished",
)  # fmt: skip
_TEXT = {"key", "target", "sampler", "notes", "worker", "finished"}
_INTEGER = {"seed", "size", "chains", "burn_in", "steps", "max_lag", "run"}
MAX_STORE_BYTES = 2_000_000_000  # what a results file may be when opened for reading
# Reading a results file is bounded in rows and in time as well as in bytes: a file's ``cells``
# must be a plain table (a view can compute rows without end from an 8 kB file), and a query
# that still runs after READ_SECONDS, or a table of more than MAX_ROWS rows, is refused.
MAX_ROWS = 2_000_000  # about 1.6 GB of stored rows (796 bytes each): the byte cap's order
READ_SECONDS = 60.0
_BATCH = 10_000


class StoreError(ValueError):
    """A results file that cannot be used, said in a sentence."""


def _column_type(name: str) -> str:
    return "TEXT" if name in _TEXT else "INTEGER" if name in _INTEGER else "REAL"


_CELL_DEFINITIONS = ", ".join(f"{c} {_column_type(c)}" for c in CELL_COLUMNS)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
    {_CELL_DEFINITIONS.replace("key TEXT", "key TEXT PRIMARY KEY", 1)}
);
CREATE TABLE IF NOT EXISTS failures (key TEXT NOT NULL, run INTEGER, error TEXT, at TEXT);
CREATE TABLE IF NOT EXISTS runs (
    run INTEGER PRIMARY KEY, grid TEXT, scheduler TEXT, workers INTEGER,
    started TEXT, ended TEXT, status TEXT
);
"""


def _now() -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        + f".{int(time.time() * 1000) % 1000:03d}Z"
    )


class ResultStore:
    """A sweep's results file, open for writing by one client.

    ``ResultStore(path, resume=False)`` creates ``path`` (refusing one that holds results unless
    ``resume``); ``start_run`` records an invocation; ``write`` stores a finished cell at once
    (a committed transaction), ignoring a cell already stored; ``done_keys`` says what is done.
    """

    def __init__(self, path: Path, resume: bool = False):
        self.path = Path(path)
        exists = self.path.exists()
        if exists and not self.path.is_file():
            raise StoreError(f"{self.path} is not a file.")
        if exists and self.path.stat().st_size > 0:
            _check_sqlite_header(self.path)
            _check_own_tables(self.path)  # another program's database is left as it is
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            # WAL: readers (the report, the app) never block the sweep; NORMAL syncs keep every
            # commit whole on a crash
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            version = self.db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.path} cannot be used as a results file: {err}.") from None
        if version is None:
            self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            self.db.commit()
        elif version[0] != str(SCHEMA_VERSION):
            raise StoreError(
                f"{self.path} was written by another version of the sweep (schema {version[0]})."
            )
        _check_columns(self.db, self.path)
        n_done = len(self.done_keys())
        if n_done and not resume:
            self.db.close()
            raise StoreError(
                f"{self.path} already holds {n_done:,} finished cells: add --resume to run only "
                "the missing ones, or give another --out."
            )
        self.run: int | None = None

    def done_keys(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT key FROM cells")}

    def start_run(self, grid: SweepGrid, scheduler: str, workers: int) -> int:
        cursor = self.db.execute(
            "INSERT INTO runs (grid, scheduler, workers, started, status) VALUES (?, ?, ?, ?, ?)",
            (json.dumps(grid.as_dict()), scheduler, int(workers), _now(), "running"),
        )
        self.db.commit()
        self.run = int(cursor.lastrowid)
        return self.run

    def end_run(self, status: str) -> None:
        if self.run is not None:
            self.db.execute(
                "UPDATE runs SET ended = ?, status = ? WHERE run = ?", (_now(), status, self.run)
            )
            self.db.commit()

    def write(self, cell: Cell, result: dict) -> bool:
        """Store a finished cell now; ``False`` (and nothing written) if it is already stored."""
        row = {**cell.as_dict(), **result, "key": cell.key, "run": self.run, "finished": _now()}
        values = [_stored(row.get(c)) for c in CELL_COLUMNS]
        marks = ", ".join("?" for _ in CELL_COLUMNS)
        cursor = self.db.execute(
            f"INSERT OR IGNORE INTO cells ({', '.join(CELL_COLUMNS)}) VALUES ({marks})", values
        )
        self.db.commit()
        return cursor.rowcount == 1

    def write_failure(self, cell: Cell, error: str) -> None:
        self.db.execute(
            "INSERT INTO failures VALUES (?, ?, ?, ?)", (cell.key, self.run, error[:2000], _now())
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _stored(value):
    """NaN as NULL (SQLite stores no NaN); everything else as it is."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _check_sqlite_header(path: Path) -> None:
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as err:
        raise StoreError(f"cannot read {path}: {err.strerror or err}.") from None
    if head != b"SQLite format 3\x00":
        raise StoreError(f"{path} is not a sweep's results file (not an SQLite database).")


def _check_own_tables(path: Path) -> None:
    """Refuse an SQLite file that holds tables but not a sweep's (writing ours into it would
    change another program's database)."""
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            _check_cells_table(db, path)
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{path} cannot be used as a results file: {err}.") from None
    if tables and "cells" not in tables:
        raise StoreError(
            f"{path} is another program's database, not a sweep's results file; give another --out."
        )


def _check_columns(db: sqlite3.Connection, path: Path) -> None:
    try:
        found = {row[1] for row in db.execute("PRAGMA table_info(cells)")}
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{path} cannot be read as a results file: {err}.") from None
    missing = [c for c in CELL_COLUMNS if c not in found]
    if missing:
        raise StoreError(
            f"{path} is not a sweep's results file: its cells table lacks {', '.join(missing)}."
        )


def read_results(path: Path, max_rows: int = MAX_ROWS, seconds: float = READ_SECONDS) -> list[dict]:
    """Every finished cell of a results file, read-only (a file still being written is fine).

    Checked before anything is read: a regular file of at most ``MAX_STORE_BYTES``, an SQLite
    database whose ``cells`` is a table (not a view) with the sweep's columns. The rows are read
    in batches: more than ``max_rows``, or a read still running after ``seconds``, is refused in
    a sentence. NULLs come back as NaN for numbers.
    """
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path} is not a file.")
    if path.stat().st_size > MAX_STORE_BYTES:
        raise StoreError(f"{path} is over {MAX_STORE_BYTES // 1_000_000:,} MB.")
    _check_sqlite_header(path)
    rows = []
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            _bound_time(db, seconds)
            _check_cells_table(db, path)
            _check_columns(db, path)
            cursor = db.execute(f"SELECT {', '.join(CELL_COLUMNS)} FROM cells")
            while batch := cursor.fetchmany(_BATCH):
                rows += batch
                if len(rows) > max_rows:
                    raise StoreError(f"{path} holds more than {max_rows:,} cells: not read.")
    except sqlite3.OperationalError as err:
        if "interrupt" in str(err):
            raise StoreError(f"{path} took more than {seconds:g} s to read: not read.") from None
        raise StoreError(f"{path} cannot be read as a results file: {err}.") from None
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{path} cannot be read as a results file: {err}.") from None
    out = []
    for row in rows:
        record = dict(zip(CELL_COLUMNS, row, strict=True))
        for name, value in record.items():
            if value is None and name not in _TEXT:
                record[name] = math.nan
        out.append(record)
    return out


def _bound_time(db: sqlite3.Connection, seconds: float) -> None:
    """Interrupt any statement of ``db`` still running ``seconds`` from now."""
    deadline = time.monotonic() + seconds
    db.set_progress_handler(lambda: time.monotonic() > deadline, 1_000)


def _check_cells_table(db: sqlite3.Connection, path: Path) -> None:
    """``cells`` must be a plain table: a view (or a virtual table) computes its rows when read,
    so its size says nothing about the file's."""
    row = db.execute("SELECT type, sql FROM sqlite_master WHERE name = 'cells'").fetchone()
    if row is None:
        return  # a new store creates it; a reader then finds no columns and says so
    kind, sql = row
    if kind != "table" or (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
        raise StoreError(
            f"{path} is not a sweep's results file: its cells is a {kind}, not a plain table."
        )
