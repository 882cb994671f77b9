"""Hostile files the red team built against the readers (issue 47), made on demand so that
nothing hostile is stored in the repository."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from lsbcore.studies.sweep.store import CELL_COLUMNS


def endless_view_file(path: Path) -> Path:
    """The red team's 8 kB results file (issue 47): a valid SQLite database whose ``cells`` is a
    recursive view with every column, so it passes the header and column checks and then yields
    rows without end when read."""
    columns = ", ".join(f"n AS {c}" for c in CELL_COLUMNS)
    with closing(sqlite3.connect(path)) as db:
        db.execute(
            "CREATE VIEW cells AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            f"SELECT {columns} FROM r"
        )
        db.commit()
    assert path.stat().st_size < 16_000
    return path


def contradicting_ring(n: int) -> str:
    """A MARKOV text of ``n`` variables on a ring: ``x_i = x_{i+1}`` along the chain and
    ``x_0 != x_{n-1}`` closing it. Each factor alone allows half its values, but no state has
    positive probability, and a local search only moves the one broken factor around the ring."""
    lines = ["MARKOV", str(n), " ".join(["2"] * n), str(n)]
    lines += [f"2 {i} {i + 1}" for i in range(n - 1)] + [f"2 0 {n - 1}", ""]
    lines += ["4", " 1 0 0 1"] * (n - 1) + ["4", " 0 1 1 0"]
    return "\n".join(lines) + "\n"
