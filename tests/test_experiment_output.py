"""The experiment's output folder is written whole or not at all: a non-empty --out needs
--force, an interrupted or failed run leaves the previous results as they were and nothing
else, and a run that cannot fit is refused before it samples."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsbcore.studies.experiment import main, output

TINY = ["--case", "1", "--size", "4", "--chains", "2", "--burn-in", "0", "--steps", "5"]
TINY += ["--samplers", "min", "--quiet"]
ROOT = Path(__file__).resolve().parents[1]


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".partial-" in p.name or ".old-" in p.name)


def previous_result(out: Path) -> None:
    out.mkdir()
    (out / "results.json").write_text('{"previous": true}')


def test_a_non_empty_out_is_refused_without_force_and_left_alone(tmp_path, capsys):
    out = tmp_path / "out"
    previous_result(out)
    with pytest.raises(SystemExit) as exc:
        main([*TINY, "--out", str(out)])
    assert exc.value.code == 2 and "is not empty; pass --force" in capsys.readouterr().err
    assert json.loads((out / "results.json").read_text()) == {"previous": True}
    assert leftovers(tmp_path) == []


def test_force_replaces_the_previous_results_whole(tmp_path):
    out = tmp_path / "out"
    previous_result(out)
    (out / "stale.txt").write_text("from an older run")
    assert main([*TINY, "--force", "--out", str(out)]) == 0
    assert "samplers" in json.loads((out / "results.json").read_text())
    assert not (out / "stale.txt").exists() and (out / "traces.csv").exists()
    assert leftovers(tmp_path) == []


def test_an_empty_existing_folder_is_used(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert main([*TINY, "--out", str(out)]) == 0
    assert (out / "report.html").exists() and leftovers(tmp_path) == []


def test_a_failed_write_leaves_the_previous_results_and_no_staging(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    previous_result(out)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("lsbcore.studies.experiment.run.build_report", disk_full)
    assert main([*TINY, "--force", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "nothing written" in err
    assert json.loads((out / "results.json").read_text()) == {"previous": True}
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert leftovers(tmp_path) == []


def test_a_place_where_nothing_can_be_written_is_refused_before_sampling(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exc:
        main([*TINY, "--out", str(blocker / "sub")])
    assert exc.value.code == 2 and "is a file, so nothing can be created under it" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        main([*TINY, "--out", str(blocker)])
    assert "is a file" in capsys.readouterr().err


LONG = "y" * 300  # a name longer than a file system's 255 bytes


@pytest.fixture
def no_sampling(monkeypatch):
    """Any sampling fails the test: each refusal must come before it, on every target."""

    def sample(*args, **kwargs):
        pytest.fail("sampled although the output path is refused")

    monkeypatch.setattr("lsbcore.studies.experiment.cli.run_experiment", sample)
    monkeypatch.setattr("lsbcore.studies.rbm.experiment.run", sample)
    monkeypatch.setattr("lsbcore.studies.networks.experiment.run", sample)


def refusal(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "where, says",
    [
        ("long name", "is 300 bytes long; a file or folder name holds at most 255"),
        ("proc", "--out: '/proc/x': '/proc' is not writable"),
        ("link to an empty folder", "is a symbolic link to"),
        ("dangling link", "is a symbolic link to"),
    ],
)
def test_an_out_that_cannot_be_used_is_refused_before_sampling(
    where, says, tmp_path, no_sampling, capsys
):
    folder = tmp_path / "empty"
    folder.mkdir()
    out = {"long name": tmp_path / LONG, "proc": Path("/proc/x")}.get(where, tmp_path / "link")
    if where == "link to an empty folder":
        out.symlink_to(folder)
    if where == "dangling link":
        out.symlink_to(tmp_path / "nowhere")
    err = refusal([*TINY, "--out", str(out)], capsys)
    assert says in err and "GiB" not in err
    # the link is kept as it was, its folder untouched, nothing left beside it
    assert not where.endswith("link") or out.is_symlink()
    assert list(folder.iterdir()) == [] and leftovers(tmp_path) == []


def test_an_image_name_too_long_is_refused(tmp_path, no_sampling, capsys):
    image = ["--image", str(tmp_path / f"{LONG}.png"), "--lam", "1", "--mu", "1", "--sigma", "1"]
    err = refusal([*image, "--out", str(tmp_path / "o")], capsys)
    assert "--image" in err and "cannot read it (File name too long)" in err


@pytest.mark.parametrize(
    "argv, flag, kind",
    [
        (["--target", "rbm-digits", "--quick", "--out"], "--out", "long name"),
        (["--target", "rbm-digits", "--quick", "--docs"], "--docs", "dangling link"),
        (["--target", "markov-networks", "--quick", "--docs"], "--docs", "long name"),
        (["--target", "markov-networks", "--quick", "--json"], "--json", "dangling link"),
    ],
    ids=["rbm-out", "rbm-docs", "networks-docs", "networks-json"],
)
def test_every_target_checks_its_output_paths_before_sampling(
    argv, flag, kind, tmp_path, no_sampling, capsys
):
    path = tmp_path / (f"{LONG}.md" if kind == "long name" else "link.md")
    if kind == "dangling link":
        path.symlink_to(tmp_path / "nowhere.md")
    err = refusal([*argv, str(path)], capsys)
    assert flag in err
    assert ("holds at most 255" if kind == "long name" else "is a symbolic link to") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (
        [] if kind == "long name" else ["link.md"]
    )


def test_a_workload_that_does_not_fit_in_memory_is_refused(tmp_path, capsys):
    args = ["--case", "1", "--size", "256", "--chains", "1000", "--steps", "100", "--burn-in", "0"]
    args += ["--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "GiB of memory" in err and "GiB are available" in err
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []


def test_room_problem_weighs_memory_then_disk(tmp_path):
    gib = 2**30
    memory, disk = output.estimate_bytes(65536, 1000, 6, 100, 10, 2)
    assert memory > 45 * gib  # 128 bytes per site per chain per sampler
    assert "memory" in output.room_problem(memory, disk, tmp_path, available=24 * gib)
    assert output.room_problem(gib, 0, tmp_path, available=24 * gib) is None
    assert "traces.csv" in output.room_problem(gib, 2**62, tmp_path, available=24 * gib)
    assert output.room_problem(gib, 0, tmp_path, available=None) is None


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_run_stops_cleanly_and_keeps_the_previous_results(tmp_path, signum, code):
    out = tmp_path / "out"
    previous_result(out)
    long_run = ["--case", "1", "--size", "20", "--chains", "4", "--burn-in", "0"]
    long_run += ["--steps", "400000", "--samplers", "barker,min", "--workers", "2", "--force"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lsbcore.studies.experiment",
            *long_run,
            "--quiet",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a test runner started in the background may ignore SIGINT, and children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        staging = []
        while time.monotonic() < deadline and not staging:  # sampling has started
            staging = [p for p in tmp_path.iterdir() if ".partial-" in p.name]
            parts = [q for p in staging for q in p.glob(".traces.*.part")]
            if not parts:
                staging = []
            time.sleep(0.2)
        assert staging, "the run never started writing"
        time.sleep(1.0)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "nothing written" in err
    assert json.loads((out / "results.json").read_text()) == {"previous": True}
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert leftovers(tmp_path) == []
    # its worker processes are gone too
    children = subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert children == [] or not any(os.path.exists(f"/proc/{c}") for c in children)


def test_the_shown_command_runs_from_any_folder_with_the_environments_python(tmp_path):
    """The dashboard shows ``python -m lsbcore.experiment ...`` to rerun a run; ``make run``
    installs lsbcore into .venv (editable), so it runs outside this folder, with no PYTHONPATH,
    on this checkout's code."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [sys.executable, "-c", "import lsbcore; print(lsbcore.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).resolve() == (ROOT / "lsbcore" / "__init__.py").resolve()
    command = ["--case", "1", "--size", "8", "--chains", "2", "--burn-in", "2", "--steps", "20"]
    command += ["--samplers", "barker", "--quiet", "--out", "out"]
    subprocess.run([sys.executable, "-m", "lsbcore.experiment", *command], cwd=tmp_path, env=env,
                   check=True, capture_output=True)  # fmt: skip
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["config"]["case"] == 1 and list(results["samplers"]) == ["barker"]
