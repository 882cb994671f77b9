"""The GPU benchmark (``lsbcore.studies.benchmarks.gpu``, issue 41): each figure on disk the
moment it is measured, a failing workload leaving the others to run, its timing rule, and the
whole command end to end at tiny sizes, the device kernels in Triton's CPU interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lsbcore.studies.benchmarks import gpu

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_figure_is_on_disk_before_the_next_is_measured_and_a_failure_leaves_the_rest(
    tmp_path, monkeypatch
):
    out = tmp_path / "figures.jsonl"
    seen_on_disk = []

    def two_figures(device, backend, size, seconds):
        yield "first", {"steps_per_second": 1.0}
        seen_on_disk.append([r.get("label") for r in lines(out)])  # the first is written
        yield "second", {"steps_per_second": 2.0}

    def broken(device, backend, size, seconds):
        yield "measured before the failure", {"steps_per_second": 3.0}
        raise RuntimeError("CUDA error: an illegal memory access\nwas encountered")

    monkeypatch.setattr(gpu, "WORKLOADS", {"a": two_figures, "b": broken, "c": two_figures})
    log = gpu.FigureLog(out, {"device": "test"})
    failed = gpu.run(["a", "b", "c"], CPU, "auto", "tiny", 0.1, log)
    assert failed == 1
    assert seen_on_disk[0] == ["first"]
    records = lines(out)
    assert [(r["workload"], r.get("label"), r.get("done")) for r in records] == [
        ("a", "first", None),
        ("a", "second", None),
        ("a", None, True),
        ("b", "measured before the failure", None),
        ("b", None, None),  # the error line: b never gets its done line
        ("c", "first", None),
        ("c", "second", None),
        ("c", None, True),
    ]
    assert records[4]["error"] == "RuntimeError: was encountered"
    assert all(r["device"] == "test" for r in records)


def test_the_rate_counts_the_steps_of_about_the_asked_seconds_after_a_warm_up(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(gpu.time, "perf_counter", lambda: clock[0])
    calls = []

    def advance(n):  # 10 ms a step
        calls.append(n)
        clock[0] += 0.01 * n

    steps_per_second, steps, seconds = gpu.rate(advance, CPU, 1.0)
    assert calls[0] == 1  # the warm-up: not timed
    assert calls[1:6] == [1, 2, 4, 8, 16]  # calls grow while short
    assert set(calls[5:]) == {16}  # then keep the first size that is not
    assert steps == sum(calls[5:]) and seconds == pytest.approx(0.01 * steps)
    assert clock[0] - 0.01 >= 1.0  # about the asked seconds in all
    assert steps_per_second == pytest.approx(100.0)


def test_the_rate_leaves_out_the_short_calls_whose_fixed_cost_would_pull_it_down(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(gpu.time, "perf_counter", lambda: clock[0])
    calls = []

    def advance(n):  # 50 ms a call, 10 ms a step
        calls.append(n)
        clock[0] += 0.05 + 0.01 * n

    steps_per_second, steps, seconds = gpu.rate(advance, CPU, 1.0)
    assert calls[1:5] == [1, 2, 4, 8] and set(calls[4:]) == {8}
    assert steps_per_second == pytest.approx(8 / 0.13)  # the steady calls' rate
    assert steps == 8 * len(calls[4:]) and seconds == pytest.approx(0.13 * len(calls[4:]))


def run_bench(out: Path, *args: str, interpret: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    command = [sys.executable, "-m", "lsbcore.studies.benchmarks.gpu", "--out", str(out), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def test_the_lattice_workloads_run_the_device_kernels_end_to_end_in_the_interpreter(tmp_path):
    pytest.importorskip("triton")
    out = tmp_path / "figures.jsonl"
    done = run_bench(
        out, "--tiny", "--device", "cpu", "--backend", "device", "--seconds", "0.05",
        "--workloads", "block-gibbs", "paper", interpret=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    records = lines(out)
    assert [r["workload"] for r in records if r.get("done")] == ["block-gibbs", "paper"]
    gibbs = [r for r in records if r["workload"] == "block-gibbs" and "label" in r]
    assert [r["label"] for r in gibbs] == [
        "block Gibbs, 8 chains of 4 x 4",
        "block Gibbs, 8 chains of 8 x 8",
    ]
    assert all(r["backend"] == "device" and r["sweeps"] >= 1 for r in gibbs)
    for r in gibbs:  # site updates are sweeps x chains x sites
        side = int(r["label"].split(" of ")[1].split(" x ")[0])
        assert r["site_updates_per_second"] == pytest.approx(r["sweeps_per_second"] * 8 * side**2)
    paper = [r for r in records if r["workload"] == "paper" and "label" in r]
    assert len(paper) == 4  # 2 and 3 chains, mixing and burn-in
    for r in paper:
        chains = int(r["label"].split(", ")[1].split()[0])
        assert r["chain_steps_per_second"] == pytest.approx(r["iterations_per_second"] * chains * 6)
    assert all(r["size"] == "tiny" and r["backend_asked"] == "device" for r in records)


def test_the_other_workloads_run_end_to_end_on_the_cpu(tmp_path):
    out = tmp_path / "figures.jsonl"
    done = run_bench(
        out, "--tiny", "--device", "cpu", "--seconds", "0.02",
        "--workloads", "rbm", "rbm-learning", "photo", "neural-block",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    records = lines(out)
    assert [r["workload"] for r in records if r.get("done")] == [
        "rbm", "rbm-learning", "photo", "neural-block"
    ]  # fmt: skip
    rbm = [r["label"] for r in records if r["workload"] == "rbm" and "label" in r]
    assert len(rbm) == 2 * len(gpu.RBM_SAMPLERS)
    learning = [r for r in records if r["workload"] == "rbm-learning" and "label" in r]
    assert [r["label"] for r in learning] == [
        f"RBM 12 x 4, 3 chains, {name} (learning)" for name in ("lsb1", "lsb2", "flsb1", "flsb2")
    ]
    assert all(r["learns_compiled"] and r["steps"] >= 1 for r in learning)  # the kernels' steps
    (photo,) = [r for r in records if r["workload"] == "photo" and "label" in r]
    assert photo["label"].startswith("photo 16 x 12") and photo["sweeps"] >= 1
    assert photo["seconds_to_settled"] >= photo["sampling_s"] > 0
    blocks = [r["label"] for r in records if r["workload"] == "neural-block" and "label" in r]
    assert blocks == [f"neural-block k = {k}, 2 chains of 8 x 8" for k in (2, 3, 4)]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seconds", "0"], "--seconds must be above 0"),
        (["--threads", "0"], "--threads must be at least 1"),
        (["--workloads", "mnist"], "invalid choice"),
    ],
)
def test_bad_options_are_refused_in_a_sentence(tmp_path, args, message, capsys):
    # in this process: the end-to-end tests above start the command itself
    with pytest.raises(SystemExit) as refused:
        gpu.main(["--out", str(tmp_path / "f.jsonl"), *args])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and message in err
    assert "Traceback" not in err and not (tmp_path / "f.jsonl").exists()
