"""What a GPU session left failed or unrun, for a second call: ``python -m tools.gpu.rerun
FOLDER [--out .gpu/rerun.json]``, where ``FOLDER`` holds the files a ``tools.gpu.session`` run
returned (the device tool's ``files_at``). The tests it lists are those collected but not
passed (failed, errored, or never reached before the run was cut off); the workloads, those of
the CUDA benchmark without their ``done`` line. Then, on the GPU:

    run(command="bash tools/gpu/device.sh --rerun .gpu/rerun.json",
        carry=[".gpu/cache", ".gpu/wheels-gpu", ".gpu/rerun.json"])
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lsbcore import interrupt, out_path
from tools.gpu.session import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]


def lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def left_over(folder: Path) -> dict:
    """``{"tests": [...], "workloads": [...]}``: what the session in ``folder`` did not finish."""
    tests = lines(folder / "tests.jsonl")
    collected = [nodeid for t in tests if "collected" in t for nodeid in t["collected"]]
    passed = {t["test"] for t in tests if t.get("outcome") in ("passed", "skipped")}
    done = {f["workload"] for f in lines(folder / "figures-cuda.jsonl") if f.get("done")}
    return {
        "tests": [nodeid for nodeid in dict.fromkeys(collected) if nodeid not in passed],
        "workloads": [name for name in WORKLOADS if name not in done],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the files a session returned")
    parser.add_argument(
        "--out",
        type=out_path.output_file,
        default=ROOT / ".gpu" / "rerun.json",
        help="writes the rerun list here",
    )
    args = parser.parse_args(argv)
    if not (args.folder / "session.jsonl").is_file():
        shown = out_path.shown(args.folder)
        parser.error(f"{shown} holds no session.jsonl: not the files of a session.")
    wanted = left_over(args.folder)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(wanted, indent=1))
    print(
        f"{len(wanted['tests'])} tests and {len(wanted['workloads'])} workloads to rerun: "
        f"{out_path.shown(args.out)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m tools.gpu.rerun"))
