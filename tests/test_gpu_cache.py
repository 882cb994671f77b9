"""The device kernels compiled ahead for a GPU (issue 41, ``tools.gpu.launches`` and
``tools.gpu.cache``): a launch recorded in Triton's interpreter, compiled for sm_90 without a
GPU into a Triton cache, found there by a later process (also after the cache moved folder, as
it does on its way to the GPU machine), and keyed for another Python's ``libtriton`` when the
GPU machine's differs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from tools.gpu import cache, launches

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[1]


def record_checkerboard(path: Path) -> None:
    """One sweep of block Gibbs on a 4 x 4 lattice in the interpreter, its launches recorded."""
    script = f"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.argv = ["launches", "--out", {str(path)!r}, "--", "-q", "-p", "no:cacheprovider",
            "tests/test_device_checkerboard.py", "-k", "step_by_step and 3x3"]
from tools.gpu import launches
raise SystemExit(launches.main(sys.argv[1:]))
"""
    done = python(script)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def python(script: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    environment.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
        env=environment, timeout=300,
    )  # fmt: skip


def build(launch_file: Path, out: Path) -> dict:
    command = [sys.executable, "-m", "tools.gpu.cache", "--launches", str(launch_file),
               "--out", str(out), "--jobs", "1"]  # fmt: skip
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**environment, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "manifest.json").read_text())


def loads(cache_dir: Path, launch_file: Path) -> list[dict]:
    """The compile listener's lines when a fresh process replays the launches against
    ``cache_dir`` (``cache_hit`` says whether the cache had each kernel)."""
    log = cache_dir.parent / "compiles.jsonl"
    log.unlink(missing_ok=True)
    script = f"""
from tools.gpu import cache, launches, watch
watch.listen({str(log)!r})
cache.replay(launches.read([{str(launch_file)!r}]), 90)
"""
    done = python(script, TRITON_CACHE_DIR=str(cache_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_recorded_launch_compiles_ahead_and_a_later_process_loads_it_even_moved(tmp_path):
    records = tmp_path / "launches.jsonl"
    record_checkerboard(records)
    recorded = launches.read([records])
    assert recorded and {r["kernel"] for r in recorded} == {
        "lsbcore.backends.device.checkerboard:colour_update_kernel"
    }
    first = recorded[0]
    assert first["kwargs"]["enable_fp_fusion"] is False and "BLOCK_D" in first["kwargs"]
    assert {"tensor": "float64", "aligned": True} in first["args"]

    built = tmp_path / "built"
    manifest = build(records, built)
    assert manifest["arch"] == 90 and manifest["launches"] == len(recorded)
    # the colour index is not specialised: both colours' launches are one kernel for each set
    # of constexprs and pointer alignments (a sweep's uniforms u[t] of 3 x 9 doubles are
    # 16-byte aligned every other sweep)
    colours = {r["args"][10]["int"] for r in recorded}
    assert colours == {0, 1}
    kinds = {
        (json.dumps(r["kwargs"], sort_keys=True), tuple(a.get("aligned") for a in r["args"] if a))
        for r in recorded
    }
    assert len(manifest["kernels"]) == len(kinds) < len(recorded)
    for group in built.glob("*/"):  # pruned to what a hit loads
        kept = sorted(p.suffix for p in group.iterdir() if not p.name.startswith("__grp__"))
        assert kept == [".cubin", ".json"]

    # on its way to the GPU machine the cache changes folder: Triton's groups name files by
    # absolute paths, so a moved cache is missed until relocated
    stale, relocated = tmp_path / "there" / "stale", tmp_path / "there" / "relocated"
    shutil.copytree(built, stale)
    shutil.copytree(built, relocated)
    shutil.rmtree(built)
    assert cache.relocate(relocated) == len(kinds)
    missed = loads(stale, records)
    assert missed and not any(entry["cache_hit"] for entry in missed)
    hits = loads(relocated, records)
    assert hits and all(entry["cache_hit"] for entry in hits)


def test_the_key_takes_the_other_libtriton_and_nothing_else(monkeypatch):
    from triton.runtime import cache as triton_cache

    monkeypatch.setattr(triton_cache, "triton_key", triton_cache.triton_key)
    own = triton_cache.triton_key()
    assert cache.keyed_for(None) == hashlib.sha256(own.encode()).hexdigest()
    other = "ab" * 32
    digest = cache.keyed_for(other)
    changed = triton_cache.triton_key()
    assert changed != own and other in changed
    assert changed.replace(other, "") == own.replace(
        next(part for part in own.split("-") if len(part) == 64 and part not in changed), ""
    )
    assert digest == hashlib.sha256(changed.encode()).hexdigest()


def test_a_wheels_libtriton_is_hashed_from_inside_the_wheel(tmp_path):
    wheel = tmp_path / "triton-3.6.0-cp312-cp312-manylinux_2_27_x86_64.whl"
    content = os.urandom(3 << 20)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("triton/__init__.py", "")
        archive.writestr(cache.LIBTRITON, content)
    assert cache.wheel_libtriton_sha256(wheel) == hashlib.sha256(content).hexdigest()


def test_a_kernels_launches_with_one_set_of_constexprs_stay_in_one_share():
    def record(kernel, block, value):
        return {"kernel": kernel, "args": [{"int": value}], "kwargs": {"BLOCK": block}}

    records = [record("a", 1, 3), record("b", 1, 3), record("a", 1, 16), record("a", 2, 1)]
    shares = cache.by_kernel(records, 2)
    assert sorted(map(len, shares)) == [2, 2]
    for share in shares:
        keys = {(r["kernel"], r["kwargs"]["BLOCK"]) for r in share}
        others = [r for s in shares if s is not share for r in s]
        assert not keys & {(r["kernel"], r["kwargs"]["BLOCK"]) for r in others}
    assert cache.by_kernel(records, 1) == [records[:1] + records[2:3] + records[1:2] + records[3:]]
    assert cache.by_kernel([], 4) == [[]]


def test_launch_arguments_are_recorded_as_triton_specialises_them():
    base = torch.zeros(4, dtype=torch.float64)
    assert launches.argument(base) == {"tensor": "float64", "aligned": True}
    assert launches.argument(base[1:]) == {"tensor": "float64", "aligned": False}
    assert launches.argument(True) == {"bool": True}
    assert launches.argument(16) == {"int": 16}
    assert launches.argument(0.5) == {"float": 0.5}
    with pytest.raises(TypeError, match="dict"):
        launches.argument({"a": 1})
    rebuilt = cache.arguments({"args": [launches.argument(base[1:]), {"int": 7}, None]})
    assert rebuilt[0].dtype == torch.float64 and rebuilt[0].data_ptr() % 16 != 0
    assert rebuilt[1:] == [7, None]
