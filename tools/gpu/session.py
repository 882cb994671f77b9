"""The one prepared command for a lent GPU (issue 41): ``python3 -m tools.gpu.session --out
$OUT [--budget SECONDS] [--rerun FILE]``, run from the repository's root by
``tools/gpu/device.sh`` (which installs the two packages the GPU machines lack) with
``.gpu/cache`` and ``.gpu/wheels-gpu`` carried (``make gpu-cache``). The device tool's call:

    run(command="bash tools/gpu/device.sh --budget 540",
        carry=[".gpu/cache", ".gpu/wheels-gpu"], timeout_s=600)

Phases, each capped so that the whole fits ``--budget`` seconds, each result written under
``--out`` the moment it exists (a run cut off still returns all it did):

1. ``facts.json``: the machine, torch, Triton, ptxas, and whether the cache built ahead was built
   for this Triton (its key), architecture and environment; the cache is pointed at its new
   folder and used as ``TRITON_CACHE_DIR``;
2. the device tests (``LSB_DEVICE_TESTS=cuda``) in order of evidence: the learning steps (never
   all run on a GPU), the frozen steps, block Gibbs, the host reads, the launch arguments, the
   compilation; ``tests.jsonl``, one line per test as it ends;
3. ``bench-gpu`` on CUDA (``figures-cuda.jsonl``), then on the same machine's CPU with all its
   cores (``figures-cpu.jsonl``);
4. the flow samplers' benchmark on CUDA (16 x 16), if time is left (``log.txt``).

``compiles.jsonl`` has a line per kernel Triton compiled or loaded from the cache
(``tools.gpu.watch``); ``session.jsonl`` a line per phase; ``log.txt`` every phase's output.
``--rerun FILE`` (``tools.gpu.rerun``) runs only the tests and workloads it lists.

Without a GPU (``--device cpu``, the tests), the device tests and the benchmark's device
kernels run in Triton's CPU interpreter, at ``--tiny`` sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from lsbcore import interrupt, out_path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".gpu" / "cache"
TEST_FILES = (  # most evidence first: what no GPU has run yet, then what it has
    "tests/test_device_learning.py",
    "tests/test_device_balanced.py",
    "tests/test_device_checkerboard.py",
    "tests/test_device_syncs.py",
    "tests/test_device_arguments.py",
    "tests/test_device_compile.py",
)
WORKLOADS = ("block-gibbs", "paper", "rbm", "rbm-learning", "photo", "neural-block")
SHARES = {"tests": 0.36, "bench cuda": 0.36, "bench cpu": 0.2}  # of the budget; the rest: extras


class Session:
    """The phases' bookkeeping: the deadline, the output folder, a line per phase."""

    def __init__(self, out: Path, budget: float):
        self.out, self.budget, self.start = out, budget, time.monotonic()

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.start)

    def note(self, record: dict) -> None:
        append(self.out / "session.jsonl", record)

    def run(self, name: str, command: list[str], cap: float, env: dict | None = None) -> str:
        """``command`` with at most ``cap`` seconds (and never past the budget); its output goes
        to ``log.txt``. Returns ``done``, ``failed`` or ``cut off``."""
        seconds = max(0.0, min(cap, self.left() - 5))
        if seconds < 5:
            self.note({"phase": name, "status": "not run", "why": "no time left"})
            return "not run"
        begun = time.monotonic()
        with (self.out / "log.txt").open("a") as log:
            log.write(f"\n### {name}: {' '.join(command)} (at most {seconds:.0f} s)\n")
            log.flush()
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
            try:
                code = process.wait(timeout=seconds)
                status = "done" if code == 0 else "failed"
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()
                code, status = None, "cut off"
        self.note(
            {
                "phase": name,
                "status": status,
                "returncode": code,
                "seconds": round(time.monotonic() - begun, 1),
            }
        )
        return status


def append(path: Path, record: dict) -> None:
    with path.open("a") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def facts(device: str, cache: Path) -> dict:
    """What the GPU machine is, and whether the cache built ahead fits its Triton."""
    import torch

    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "cpus": os.cpu_count(),
    }
    if device == "cuda":
        found["gpu"] = torch.cuda.get_device_name(0)
        major, minor = torch.cuda.get_device_capability(0)
        found["arch"] = major * 10 + minor
    try:
        import triton

        found["triton"] = triton.__version__
    except ImportError:
        found["triton"] = None
        return found
    manifest_path = cache / "manifest.json"
    if not manifest_path.is_file():
        found["cache"] = "none carried"
        return found
    from tools.gpu.cache import relocate

    manifest = json.loads(manifest_path.read_text())
    found["cache"] = {
        "kernels": len(manifest["kernels"]),
        "groups": relocate(cache),
        "built_for": {k: manifest[k] for k in ("triton", "arch", "env_vars")},
    }
    if os.environ.get("TRITON_INTERPRET") != "1":
        import hashlib

        from triton._C.libtriton import get_cache_invalidating_env_vars
        from triton.runtime.cache import triton_key

        key = hashlib.sha256(triton_key().encode()).hexdigest()
        env_vars = get_cache_invalidating_env_vars()
        found["cache"]["key_matches"] = key == manifest["triton_key_sha256"]
        found["cache"]["env_vars_match"] = env_vars == manifest["env_vars"]
        found["env_vars"] = env_vars
        if device == "cuda":
            from triton.backends.nvidia.compiler import get_ptxas_version

            found["ptxas"] = get_ptxas_version(found["arch"]).strip().splitlines()[-1]
            found["cache"]["arch_matches"] = found["arch"] == manifest["arch"]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=out_path.output_folder,
        required=True,
        help="writes every result here as it is measured",
    )
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for everything")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="the benchmark at a few sites")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds a figure")
    parser.add_argument(
        "--rerun",
        type=Path,
        default=None,
        help="only the tests and workloads this file lists (tools.gpu.rerun)",
    )
    parser.add_argument("--tests", nargs="*", default=None, help="test files or ids to run")
    parser.add_argument(
        "--workloads", nargs="*", choices=WORKLOADS, default=None, help="bench-gpu's to run"
    )
    parser.add_argument("--cache", type=Path, default=CACHE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 30 <= args.budget <= 3600:
        parser.error("--budget must be between 30 and 3,600 seconds.")
    tests = list(TEST_FILES if args.tests is None else args.tests)
    workloads = list(WORKLOADS if args.workloads is None else args.workloads)
    if args.rerun is not None:
        try:
            wanted = json.loads(args.rerun.read_text())
            tests, workloads = list(wanted["tests"]), list(wanted["workloads"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            parser.error(f"--rerun: not a rerun file ({err}).")
    args.out.mkdir(exist_ok=True)
    session = Session(args.out, args.budget)
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]  # device.sh's wheels
    env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(paths)}
    if args.cache.is_dir():
        env["TRITON_CACHE_DIR"] = str(args.cache.resolve())
        os.environ["TRITON_CACHE_DIR"] = env["TRITON_CACHE_DIR"]
    if args.device == "cuda":
        env["LSB_DEVICE_TESTS"] = "cuda"
    else:
        env["TRITON_INTERPRET"] = os.environ["TRITON_INTERPRET"] = "1"
    (args.out / "facts.json").write_text(json.dumps(facts(args.device, args.cache), indent=1))
    watch = [sys.executable, "-m", "tools.gpu.watch", str(args.out / "compiles.jsonl")]
    phases = []
    if tests:
        test_env = {**env, "LSB_OUTCOMES": str(args.out / "tests.jsonl")}
        command = [
            *watch,
            "pytest",
            "-q",
            "-p",
            "tools.gpu.outcomes",
            "-p",
            "no:cacheprovider",
            *tests,
        ]
        phases.append(("tests", command, test_env))
    bench = [
        *watch,
        "lsbcore.studies.benchmarks.gpu",
        "--seconds",
        str(args.seconds),
        *(["--tiny"] if args.tiny else []),
    ]
    if workloads:
        figures = str(args.out / f"figures-{args.device}.jsonl")
        device_bench = [
            *bench,
            "--device",
            args.device,
            "--backend",
            "device",
            "--out",
            figures,
            "--workloads",
            *workloads,
        ]
        phases.append((f"bench {args.device}", device_bench, env))
        if args.device == "cuda":
            host = [
                *bench,
                "--device",
                "cpu",
                "--threads",
                str(os.cpu_count() or 1),
                "--out",
                str(args.out / "figures-cpu.jsonl"),
                "--workloads",
                *workloads,
            ]
            phases.append(("bench cpu", host, env))
    for name, command, phase_env in phases:
        session.run(name, command, SHARES.get(name, 0.36) * args.budget, phase_env)
    if args.device == "cuda" and args.rerun is None:
        flows = ["lsbcore.studies.flows.benchmark", "--device", "cuda", "--size", "16"]
        session.run("flows", [*watch, *flows], session.left(), env)
    session.note({"phase": "end", "seconds": round(args.budget - session.left(), 1)})
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m tools.gpu.session"))
