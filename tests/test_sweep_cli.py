"""``python -m lsbcore.studies.sweep``: Ctrl-C keeps every finished cell and ``--resume`` runs only
the
missing ones; bad input is one sentence and exit status 2.

The interrupted and resumed sweeps use this module's 2-worker cluster through ``--scheduler``
(workers already warm), so they also cover a sweep on an existing cluster.
"""

from __future__ import annotations

import io
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from lsbcore.studies.sweep import cli, driver
from lsbcore.studies.sweep.driver import SweepState
from lsbcore.studies.sweep.grid import SweepGrid
from lsbcore.studies.sweep.progress import Progress, progress_line
from lsbcore.studies.sweep.store import StoreError, read_results

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--size", "8", "--chains", "2", "--burn-in", "50", "--max-lag", "50"]
# 24 cells of about 0.3 s each: a few seconds on two workers, time enough to interrupt
SLOW_GRID = [
    "--targets", "square", "--lam", "0:1:3", "--sigma", "1,2", "--samplers", "barker,min",
    "--seeds", "2", *TINY, "--steps", "60000",
]  # fmt: skip


@pytest.fixture(scope="module")
def scheduler():
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(driver.code_hash)  # imports lsbcore on the workers
        yield cluster.scheduler_address


def fails_with(capsys, argv: list[str]) -> str:
    """Run the command in-process; it must exit 2 with one line of error, returned."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("python -m lsbcore.studies.sweep: error: ")
    assert "Traceback" not in "\n".join(err)
    return err[-1].removeprefix("python -m lsbcore.studies.sweep: error: ")


def test_ctrl_c_keeps_the_finished_cells_and_resume_runs_only_the_missing_ones(
    scheduler, tmp_path, capsys
):
    out = tmp_path / "map.sqlite"
    argv = [*SLOW_GRID, "--out", str(out), "--scheduler", scheduler, "--quiet"]
    n_cells = 24
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsbcore.studies.sweep", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # started as a shell's background job is: SIGINT ignored, so Python sets no handler
        # (the sweep ran to its end and exited 0 when its own handler was missing)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 90
    stored = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            stored = len(read_results(out))
        except (StoreError, OSError, sqlite3.Error):
            stored = 0
        if stored >= 2:
            break
        time.sleep(0.05)
    assert 2 <= stored < n_cells, f"could not interrupt mid-sweep (stored {stored})"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    first = {r["key"]: r for r in read_results(out)}
    assert 2 <= len(first) < n_cells
    missing = n_cells - len(first)
    assert (
        f"{len(first)} of {n_cells} cells finished and stored; run the same command with "
        f"--resume to run the other {missing}"
    ) in err
    assert "Traceback" not in err

    # without --resume the file is refused; nothing runs, nothing changes
    sentence = fails_with(capsys, argv)
    assert f"already holds {len(first)} finished cells" in sentence and "--resume" in sentence
    assert len(read_results(out)) == len(first)

    assert cli.main([*argv, "--resume"]) == 0
    assert f"{missing} cells run and stored" in capsys.readouterr().out
    rows = read_results(out)
    grid_keys = {c.key for c in cli.build_grid(cli.parser().parse_args(argv)).cells()}
    assert sorted(r["key"] for r in rows) == sorted(grid_keys)  # the whole grid, each once
    for r in rows:
        if r["key"] in first:  # the first run's cells untouched
            assert (r["run"], r["finished"]) == (
                first[r["key"]]["run"],
                first[r["key"]]["finished"],
            )
    new = {r["key"] for r in rows if r["run"] != first[next(iter(first))]["run"]}
    assert new == grid_keys - set(first)  # the second run ran exactly the missing cells
    with sqlite3.connect(out) as db:
        runs = db.execute("SELECT status FROM runs ORDER BY run").fetchall()
    assert runs == [("interrupted",), ("finished",)]


def test_a_dry_run_counts_the_cells_and_estimates_without_running(tmp_path, capsys):
    out = tmp_path / "map.sqlite"
    argv = ["--lam", "0,1", "--samplers", "barker,min", "--seeds", "2", *TINY, "--steps", "300"]
    assert cli.main([*argv, "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"8 cells; 0 already in {out}; 8 to run.")
    assert "CPU-hours" in text and "barker" in text and "min" in text
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--lam", "0:1"], "lambda must be 'start:stop:count'"),
        (["--sigma", "-1"], "sigma must be within"),
        (["--samplers", "barker,nope"], "unknown sampler(s) 'nope'"),
        (["--targets", "moon"], "unknown target 'moon'"),
        (["--seed-list", "0,x"], "--seed-list must be integers"),
        (["--steps", "5"], "steps must be from 10"),
        (["--scheduler", "http://head:8786"], "--scheduler must be a Dask scheduler's address"),
        (["--scheduler", "tcp://head:99999"], "tcp://HOST:PORT"),
        (["--workers", "0"], "--workers must be from 1"),
    ],
)
def test_bad_flags_are_refused_in_a_sentence(tmp_path, capsys, flags, words):
    sentence = fails_with(capsys, [*flags, "--out", str(tmp_path / "m.sqlite")])
    assert words in sentence
    assert not (tmp_path / "m.sqlite").exists()


def test_bad_files_are_refused_in_a_sentence(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("lam = [0.0, \n", encoding="utf-8")
    assert "is not valid TOML" in fails_with(
        capsys, ["--config", str(bad), "--out", str(tmp_path / "m.sqlite")]
    )
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('lam = "0:1:3"\nbeta = 2\n', encoding="utf-8")
    assert "unknown key(s) beta" in fails_with(
        capsys, ["--config", str(unknown), "--out", str(tmp_path / "m.sqlite")]
    )
    assert "is a folder" in fails_with(capsys, ["--out", str(tmp_path)])
    assert "does not exist" in fails_with(capsys, ["--out", str(tmp_path / "no" / "m.sqlite")])
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database", encoding="utf-8")
    assert "not an SQLite database" in fails_with(capsys, ["--out", str(text), "--resume"])


def test_flags_override_the_toml_keys(tmp_path):
    config = tmp_path / "grid.toml"
    config.write_text(
        'lam = "0:1:3"\nsigma = [1.0, 2.0]\nsamplers = ["barker", "min"]\nseeds = 2\n'
        "[protocol]\nsize = 8\nchains = 2\nsteps = 300\n",
        encoding="utf-8",
    )
    args = cli.parser().parse_args(
        ["--config", str(config), "--sigma", "3", "--seed-list", "4,7", "--steps", "500",
         "--out", "x.sqlite"]
    )  # fmt: skip
    grid = cli.build_grid(args)
    assert grid == SweepGrid(
        lam=(0.0, 0.5, 1.0),
        sigma=(3.0,),
        samplers=("barker", "min"),
        seeds=(4, 7),
        protocol=grid.protocol,
    )
    assert (grid.protocol.size, grid.protocol.chains, grid.protocol.steps) == (8, 2, 500)


def test_an_unreachable_scheduler_is_a_sentence_not_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(driver, "CONNECT_TIMEOUT_S", 1.0)
    out = tmp_path / "m.sqlite"
    code = cli.main(["--lam", "0", *TINY, "--out", str(out), "--scheduler", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 1
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 1 s" in err
    assert "Traceback" not in err
    with sqlite3.connect(out) as db:
        assert db.execute("SELECT status FROM runs").fetchall() == [("failed",)]


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_line_counts_cells_and_estimates_the_time_left_from_the_mean_rate():
    state = SweepState(total=110, skipped=10, done=20, failed=5, running=2, queued=73, started=0.0)
    line = progress_line(state, now=50.0)  # 25 cells through in 50 s: 75 left take 150 s
    assert "25/100 cells" in line and "done 20, failed 5, running 2, queued 73" in line
    assert "(10 from earlier runs)" in line and line.endswith("ETA 2 min 30 s")
    assert line.startswith("[" + "#" * 6 + "." * 18 + "]")  # a quarter of 24
    assert progress_line(SweepState(total=4, skipped=0), now=9.0).endswith("ETA ?")


def test_progress_redraws_one_line_on_a_terminal_and_writes_plain_lines_to_a_log():
    state = SweepState(total=10, skipped=0, done=1)
    tty = Terminal()
    shown = Progress(stream=tty, interval_s=0.5)
    for _ in range(50):  # a burst of cells within half a second: drawn once
        shown.update(state)
    shown.close(state)
    assert tty.getvalue().count("\r") == 2 and tty.getvalue().endswith("\n")
    log = io.StringIO()
    plain = Progress(stream=log, log_every_s=10.0)
    for _ in range(50):
        plain.update(state)
    plain.close(state)
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in log.getvalue() and "[" not in lines[0]
