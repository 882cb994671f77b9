"""The prepared device command (``tools.gpu.session``, issue 41) end to end without a GPU: the
device tests and the benchmark's device kernels in Triton's CPU interpreter at tiny sizes, every
result written as it comes, a phase cut off at its cap keeping what it wrote, and the rerun list
(``tools.gpu.rerun``) of what a session left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.gpu import rerun, session

ROOT = Path(__file__).resolve().parents[1]
ONE_TEST = "tests/test_device_checkerboard.py::test_pull_tables_list_each_sites_neighbours_in_increasing_order"  # noqa: E501


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_device_script(out: Path, *args: str) -> subprocess.CompletedProcess:
    """``tools/gpu/device.sh`` as the device tool runs it (``$OUT`` set, ``python3`` first on
    the path: here this environment's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env.update(OUT=str(out), PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]))
    return subprocess.run(
        ["bash", "tools/gpu/device.sh", *args], capture_output=True, text=True, cwd=ROOT,
        timeout=400, env=env,
    )  # fmt: skip


def test_a_session_runs_its_phases_in_the_interpreter_and_writes_each_result(tmp_path):
    pytest.importorskip("triton")
    out = tmp_path / "out"
    done = run_device_script(
        out, "--device", "cpu", "--tiny", "--budget", "300", "--seconds", "0.05",
        "--tests", ONE_TEST, "--workloads", "block-gibbs", "--cache", str(tmp_path / "none"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads((out / "facts.json").read_text())
    assert facts["device"] == "cpu" and facts["cache"] == "none carried"
    tests = lines(out / "tests.jsonl")
    assert tests[0] == {"collected": [ONE_TEST]}
    assert tests[1]["test"] == ONE_TEST and tests[1]["outcome"] == "passed"
    figures = lines(out / "figures-cpu.jsonl")
    assert [f["label"] for f in figures if "label" in f] == [
        "block Gibbs, 8 chains of 4 x 4",
        "block Gibbs, 8 chains of 8 x 8",
    ]
    assert all(f["backend"] == "device" for f in figures if "label" in f)
    phases = lines(out / "session.jsonl")
    assert [(p["phase"], p.get("status")) for p in phases] == [
        ("tests", "done"),
        ("bench cpu", "done"),
        ("end", None),
    ]
    assert "1 passed" in (out / "log.txt").read_text()
    # nothing ran as a compiled GPU kernel here: the interpreter compiles nothing
    assert not (out / "compiles.jsonl").exists()


def test_a_phase_past_its_cap_is_cut_off_and_keeps_what_it_wrote(tmp_path):
    written = tmp_path / "written.txt"
    script = f"open({str(written)!r}, 'w').write('measured'); import time; time.sleep(120)"
    timed = session.Session(tmp_path, budget=60)
    begun = time.monotonic()
    status = timed.run("slow", [sys.executable, "-c", script], cap=8)
    assert status == "cut off" and time.monotonic() - begun < 30
    assert written.read_text() == "measured"
    (phase,) = lines(tmp_path / "session.jsonl")
    assert phase["phase"] == "slow" and phase["status"] == "cut off"
    assert phase["returncode"] is None
    short = session.Session(tmp_path, budget=4)
    assert short.run("late", [sys.executable, "-c", "pass"], cap=100) == "not run"


def write_lines(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_rerun_lists_tests_not_passed_and_workloads_not_done(tmp_path):
    write_lines(tmp_path / "session.jsonl", [{"phase": "tests", "status": "cut off"}])
    collected = ["t::a", "t::b", "t::c", "t::d"]
    write_lines(
        tmp_path / "tests.jsonl",
        [
            {"collected": collected},
            {"test": "t::a", "outcome": "passed"},
            {"test": "t::b", "outcome": "failed", "message": "assert 1 == 2"},
            {"test": "t::c", "outcome": "skipped"},
        ],
    )
    write_lines(
        tmp_path / "figures-cuda.jsonl",
        [
            {"workload": "block-gibbs", "label": "x"},
            {"workload": "block-gibbs", "done": True},
            {"workload": "paper", "label": "cut off after this"},
        ],
    )
    wanted = rerun.left_over(tmp_path)
    assert wanted["tests"] == ["t::b", "t::d"]  # failed, and never reached
    assert wanted["workloads"] == [w for w in session.WORKLOADS if w != "block-gibbs"]
    out = tmp_path / "rerun.json"
    assert rerun.main([str(tmp_path), "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == wanted


def test_a_folder_without_a_session_and_a_bad_rerun_file_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        rerun.main([str(tmp_path), "--out", str(tmp_path / "r.json")])
    assert stop.value.code == 2 and "not the files of a session" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"tests": 3}')
    with pytest.raises(SystemExit) as stop:
        session.main(["--out", str(tmp_path / "o"), "--rerun", str(bad), "--device", "cpu"])
    assert stop.value.code == 2 and "not a rerun file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
