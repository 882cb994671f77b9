"""The device kernels compiled ahead for a GPU machine, on a machine without a GPU:
``python -m tools.gpu.cache --launches FILE ... --out DIR [--triton 3.6.0] [--python 3.12]
[--arch 90] [--jobs N]``.

Triton keeps each compiled kernel in its cache under a hash of: its own version and files (the
compiled ``libtriton`` too, which differs between Python versions), the kernel's source, the
arguments' specialisation, ptxas's version and the architecture, the options, and a few
environment variables. A run on the GPU machine finds a kernel there instead of compiling it
(about a minute a learning kernel) when every part is the same. So the launches recorded here
(``tools.gpu.launches``) are replayed as Triton's own warm-up compilations, under the GPU
machine's Triton version, with a stand-in driver that reports the GPU's architecture, and the
key's ``libtriton`` part taken from the wheel of the GPU machine's Python. The result is a
Triton cache folder (``TRITON_CACHE_DIR``) that travels with the run; its ``manifest.json``
says what it was built for, and ``session`` checks that against the GPU machine first.

``--triton`` other than the running Triton's version: that version's wheels (this Python's, to
run; the GPU machine's, for its hash) are fetched with pip into ``--wheels`` and the replay
runs under it in a child process. Without ``--triton`` the running Triton is used, keyed for
this Python (the tests).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

from lsbcore import interrupt, out_path

ROOT = Path(__file__).resolve().parents[2]
LIBTRITON = "triton/_C/libtriton.so"
MANIFEST = "manifest.json"
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)


class StandInDriver:
    """Triton's active driver where there is no GPU: the GPU's architecture, device 0."""

    def __init__(self, arch: int):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", arch, 32)

    def get_current_target(self):
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device=None) -> int:
        return 0


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def wheel_libtriton_sha256(wheel: Path) -> str:
    """The sha256 of the ``libtriton`` a Triton wheel installs (Triton hashes it into keys)."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as archive, archive.open(LIBTRITON) as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


_ORIGINAL: dict = {}


def keyed_for(libtriton_sha256: str | None) -> str:
    """Make Triton's own key (``triton_key``) the one a Triton with the ``libtriton`` of that
    sha256 computes (the same version for another Python); returns the key's sha256."""
    import triton
    from triton.runtime import cache

    key = _ORIGINAL.setdefault("triton_key", cache.triton_key)()  # once keyed, a fork is too
    if libtriton_sha256 is not None:
        ext = sysconfig.get_config_var("EXT_SUFFIX").split(".")[-1]
        own = file_sha256(Path(triton.__file__).parent / "_C" / f"libtriton.{ext}")
        if own not in key:
            raise RuntimeError("this Triton's key does not hold its libtriton's hash.")
        key = key.replace(own, libtriton_sha256)
        cache.triton_key = lambda: key
    return hashlib.sha256(key.encode()).hexdigest()


def kernel_of(name: str):
    import importlib

    module, qualname = name.split(":")
    return getattr(importlib.import_module(module), qualname)


def arguments(record: dict) -> list:
    """Arguments a launch's record stands for: tensors of its dtype and alignment (a few
    elements: their sizes are not specialised), the same integers and floats."""
    import torch

    values = []
    for arg in record["args"]:
        if arg is None:
            values.append(None)
        elif "tensor" in arg:
            dtype = getattr(torch, arg["tensor"])
            base = torch.zeros(8, dtype=dtype)
            values.append(base if arg["aligned"] else base[1:])
        else:
            (value,) = arg.values()
            values.append(value)
    return values


def replay(records: list[dict], arch: int) -> list[dict]:
    """Each launch compiled for ``sm_<arch>`` through ``JITFunction.warmup`` (Triton decides
    what is distinct); returns one line per compiled kernel with its seconds and cache hash."""
    from triton.runtime.driver import driver

    driver.set_active(StandInDriver(arch))
    done, out = set(), []
    for record in records:
        kernel = kernel_of(record["kernel"])
        start = time.perf_counter()
        compiled = kernel.warmup(*arguments(record), grid=(1,), **record["kwargs"])
        if compiled is None:
            raise RuntimeError(f"{record['kernel']}: Triton compiled nothing.")
        if compiled.hash not in done:
            done.add(compiled.hash)
            seconds = round(time.perf_counter() - start, 2)
            out.append(
                {
                    "kernel": record["kernel"],
                    "hash": compiled.hash,
                    "seconds": seconds,
                    "constexprs": record["kwargs"],
                }
            )
    return out


def by_kernel(records: list[dict], jobs: int) -> list[list[dict]]:
    """The records in at most ``jobs`` shares, a kernel's launches with one set of constexprs
    in one share (so no two processes compile the same kernel)."""
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(record["kernel"] + json.dumps(record["kwargs"]), []).append(record)
    shares: list[list[dict]] = [[] for _ in range(min(jobs, len(groups)) or 1)]
    for group in sorted(groups.values(), key=len, reverse=True):  # the largest first
        min(shares, key=len).extend(group)  # to the share with the fewest launches
    return shares


def cache_folder(kernel_hash: str) -> str:
    """The folder Triton's file cache keeps a compiled kernel in (its hash in base 32)."""
    return base64.b32encode(bytes.fromhex(kernel_hash)).decode().rstrip("=")


def drop_others(cache_dir: Path, hashes: list[str]) -> int:
    """Remove every kernel of ``cache_dir`` but those of ``hashes`` (an earlier build's), so
    that what travels is this build; returns how many were removed."""
    keep = {cache_folder(h) for h in hashes}
    others = [d for d in cache_dir.iterdir() if d.is_dir() and d.name not in keep]
    for folder in others:
        shutil.rmtree(folder)
    return len(others)


#: what a cache hit loads: the metadata and the binary (the IR and PTX are for reading only)
KEPT = (".json", ".cubin")


def relocate(cache_dir: Path, prune: bool = False) -> int:
    """Point every group file of a Triton cache at the files beside it (Triton writes absolute
    paths, so a cache moved to another folder or machine would not find its own files); with
    ``prune``, drop all but ``KEPT`` (a fifth of the size). Returns the number of groups."""
    groups = sorted(cache_dir.glob("*/__grp__*.json"))
    for group in groups:
        children = {}
        for name in json.loads(group.read_text()).get("child_paths", {}):
            if prune and not name.endswith(KEPT):
                (group.parent / name).unlink(missing_ok=True)
            else:
                children[name] = str(group.parent / name)
        group.write_text(json.dumps({"child_paths": children}))
    return len(groups)


def fetch_wheel(version: str, python: str, wheels: Path) -> Path:
    """Triton ``version``'s wheel for CPython ``python`` (``3.12``), fetched once by pip."""
    tag = "cp" + python.replace(".", "")
    found = sorted(wheels.glob(f"triton-{version}-{tag}-*.whl"))
    if not found:
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                python,
                "--implementation",
                "cp",
                *platforms,
                "-d",
                str(wheels),
                f"triton=={version}",
            ],
            check=True,
        )
        found = sorted(wheels.glob(f"triton-{version}-{tag}-*.whl"))
    if not found:
        raise RuntimeError(f"pip fetched no Triton {version} wheel for Python {python}.")
    return found[0]


def unpacked(wheel: Path) -> Path:
    """The wheel unpacked beside itself (a folder to put first on ``PYTHONPATH``)."""
    site = wheel.with_suffix("")
    if not (site / "triton" / "__init__.py").exists():
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
            for member in archive.infolist():  # zipfile drops the modes: ptxas must run
                mode = member.external_attr >> 16
                if mode & 0o111:
                    (site / member.filename).chmod(mode & 0o777)
    return site


def build(launch_files, out: Path, arch: int, libtriton_sha256: str | None, jobs: int) -> dict:
    """Replay the launches into the Triton cache ``out`` (this process's Triton; ``jobs``
    processes, a kernel's launches in one of them) and write its manifest."""
    import triton
    from triton._C.libtriton import get_cache_invalidating_env_vars

    from tools.gpu import launches

    os.environ["TRITON_CACHE_DIR"] = str(out.resolve())
    os.environ.pop("TRITON_INTERPRET", None)
    records = launches.read(launch_files)
    key = keyed_for(libtriton_sha256)
    start = time.perf_counter()
    shares = by_kernel(records, jobs)
    if len(shares) == 1:
        compiled = replay(records, arch)
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, initializer=keyed_for, initargs=(libtriton_sha256,)) as pool:
            compiled = [line for part in pool.map(replay, shares, [arch] * jobs) for line in part]
    manifest = {
        "triton": triton.__version__,
        "triton_key_sha256": key,
        "libtriton_sha256": libtriton_sha256,
        "arch": arch,
        "env_vars": get_cache_invalidating_env_vars(),
        "launches": len(records),
        "kernels": compiled,
        "seconds": round(time.perf_counter() - start, 1),
        "dropped": drop_others(out, [line["hash"] for line in compiled]),
        "groups": relocate(out, prune=True),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--launches",
        nargs="+",
        type=Path,
        required=True,
        help="launch records (tools.gpu.launches)",
    )
    parser.add_argument(
        "--out",
        type=out_path.output_folder,
        required=True,
        help="writes the Triton cache folder here",
    )
    parser.add_argument("--triton", default=None, help="the GPU machine's Triton (3.6.0)")
    parser.add_argument("--python", default=None, help="the GPU machine's Python (3.12)")
    parser.add_argument("--arch", type=int, default=90, help="compute capability (90: H100/H200)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--wheels",
        type=Path,
        default=ROOT / ".gpu" / "wheels",
        help="where Triton's wheels are fetched to",
    )
    parser.add_argument("--libtriton-sha256", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for path in args.launches:
        if not path.is_file():
            parser.error(f"--launches: no file {out_path.shown(path)}.")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1.")
    import triton

    if args.triton and args.triton != triton.__version__:  # run under that Triton, as a child
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        site = unpacked(fetch_wheel(args.triton, here, args.wheels))
        target = fetch_wheel(args.triton, args.python or here, args.wheels)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
        command = [
            sys.executable,
            "-m",
            "tools.gpu.cache",
            "--launches",
            *map(str, args.launches),
            "--out",
            str(args.out),
            "--arch",
            str(args.arch),
            "--jobs",
            str(args.jobs),
            "--libtriton-sha256",
            wheel_libtriton_sha256(target),
        ]
        return subprocess.run(command, env=env).returncode
    sha = args.libtriton_sha256
    if args.python and sha is None:
        sha = wheel_libtriton_sha256(fetch_wheel(triton.__version__, args.python, args.wheels))
    args.out.mkdir(exist_ok=True)
    manifest = build(args.launches, args.out, args.arch, sha, args.jobs)
    print(
        f"Triton {manifest['triton']}, sm_{args.arch}: {len(manifest['kernels'])} kernels "
        f"compiled from {manifest['launches']} launches in {manifest['seconds']} s "
        f"into {out_path.shown(args.out)} (key {manifest['triton_key_sha256'][:12]})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m tools.gpu.cache"))
