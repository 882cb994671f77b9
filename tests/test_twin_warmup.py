"""The learning kernels' parallel twins compiled ahead in a child process, and the chain groups
held to one until they are (``samplers.twin_warmup``, ``threads.hold_groups``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from lsbcore.backends import chain_groups, threads
from lsbcore.samplers import twin_warmup
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.rbm import RBM


def test_a_hold_gives_one_group_until_its_event_is_set_and_forced_groups_pass_it(monkeypatch):
    monkeypatch.setattr(threads, "cores", lambda: 4)
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)
    big = threads.MIN_LEARNING_WORK  # a chain's step that pays for a group of its own
    assert threads.learning_groups(8, big) == 4
    twins = threading.Event()
    threads.hold_groups(twins)
    assert threads.learning_groups(8, big) == 1
    with threads.forced_groups(2):  # the warm-up and the benchmarks reach the twins held or not
        assert threads.learning_groups(8, big) == 2
    twins.set()
    assert threads.learning_groups(8, big) == 4
    threads.hold_groups(None)
    assert threads.learning_groups(8, big) == 4


def _real_runs() -> None:
    """The learning runs the app's pages take, at sizes other than the warm-up's, in two
    groups: each grouped learning kernel, with a trace and without."""
    rng = torch.Generator().manual_seed(3)
    rbm = RBM.random(12, 5, seed=3)
    network = grid_network(4, 0.4, 1)
    runs = [
        *((name, rbm) for name in ("lsb1", "lsb2", "flsb1", "flsb2")),
        *((name, network) for name in ("lsb1", "lsb2", "flsb1")),
        *(
            ("lsb2", IsingPosterior(torch.randn(5, 6, generator=rng, dtype=torch.float64), 0.7, b))
            for b in ("free", "periodic")
        ),
    ]
    with threads.forced_groups(2):
        for name, target in runs:
            sampler = make_sampler(name, target, 5, seed=1)
            sampler.track_statistics()
            sampler.step(3, learn=True, trace=torch.zeros(3, 5, 5, dtype=torch.float64))
            sampler.step(3, learn=True)


def test_the_warm_up_compiles_every_twin_for_the_argument_types_real_runs_pass():
    """After ``compile_twins`` every twin holds a compiled overload, and the app's learning runs
    in groups (LSB 1, LSB 2 and FLSB on an RBM, a network and a lattice) add none: a first run
    with groups would never compile one, and the disk cache holds each (``all_cached``)."""
    if not threads.parallel_ready():
        pytest.skip("no thread-safe numba threading layer (OpenMP or TBB) on this machine")
    assert twin_warmup.compile_twins()
    assert len(chain_groups.TWINS) == 4  # LSB 2's on lattices, the RBM's two, the network's
    compiled = {twin.py_func.__qualname__: set(twin.signatures) for twin in chain_groups.TWINS}
    assert all(compiled.values()), compiled
    _real_runs()
    assert {t.py_func.__qualname__: set(t.signatures) for t in chain_groups.TWINS} == compiled
    assert twin_warmup.all_cached()


def test_the_child_process_sets_the_event_where_the_twins_are_not_cached(monkeypatch):
    """The child process runs ``python -m lsbcore.samplers.twin_warmup`` from the project
    root and sets the event when it ends well; where the cache holds the twins, nothing runs."""
    monkeypatch.setattr(twin_warmup, "all_cached", lambda: False)
    done = threading.Event()
    assert twin_warmup.compile_elsewhere(done, timeout_s=600)
    assert done.is_set()
    started = []
    monkeypatch.setattr(twin_warmup, "all_cached", lambda: True)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a))
    done = threading.Event()
    assert twin_warmup.compile_elsewhere(done) and done.is_set() and not started


@pytest.mark.parametrize(
    "outcome",
    [
        subprocess.CompletedProcess([], 1, "", "Traceback ... numba.core.errors.TypingError"),
        subprocess.TimeoutExpired([], 900),
        FileNotFoundError("no python here"),
    ],
)
def test_a_failed_child_process_leaves_the_groups_held_and_says_why(outcome, monkeypatch, caplog):
    """The kernels then keep one group (slower on several cores, the same chains): never a
    twin compiled in the middle of a run."""

    def run(*args, **kwargs):
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(twin_warmup, "all_cached", lambda: False)
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)
    done = threading.Event()
    threads.hold_groups(done)
    with caplog.at_level(logging.WARNING, logger=twin_warmup.__name__):
        assert not twin_warmup.compile_elsewhere(done)
    assert not done.is_set()
    assert threads.learning_groups(64, threads.MIN_LEARNING_WORK) == 1
    assert "keep one chain group" in caplog.text


def test_the_apps_warm_up_holds_the_groups_until_the_twins_are_ready(monkeypatch):
    """``warmup.compile_in_background`` (the app's) holds the learning kernels to one group
    from its start and lifts the hold once the twins are in the disk cache."""
    from lsbcore.samplers import warmup

    monkeypatch.setattr(warmup, "TWINS_IN_CHILD", True)
    monkeypatch.setattr(threads, "cores", lambda: 4)
    monkeypatch.setattr(threads, "parallel_ready", lambda: True)
    twin_warmup.compile_twins()  # cached, as after a first start
    entered = threading.Event()
    release = threading.Event()
    compile_kernels = warmup.compile_kernels

    def slow_compile():  # the warm-up still under way
        entered.set()
        release.wait(60)
        compile_kernels()

    monkeypatch.setattr(warmup, "compile_kernels", slow_compile)
    thread = warmup.compile_in_background()
    assert entered.wait(60)
    assert threads.learning_groups(8, threads.MIN_LEARNING_WORK) == 1
    release.set()
    thread.join(120)
    assert not thread.is_alive()
    assert threads.learning_groups(8, threads.MIN_LEARNING_WORK) == 4


def test_the_child_process_runs_at_a_lower_priority_than_the_server():
    code = (
        "import os; from lsbcore.samplers import twin_warmup; "
        "twin_warmup.compile_twins = lambda kinds: True; twin_warmup.main(); print(os.nice(0))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) == min(os.nice(0) + 10, 19)


# A server stand-in: compiles the twins in a child (an empty numba cache: a long compile), idle
PARENT = """
import threading, time
from lsbcore.samplers import twin_warmup
twin_warmup.all_cached = lambda: False
threading.Thread(target=twin_warmup.compile_elsewhere, args=(threading.Event(),)).start()
time.sleep(600)
"""


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl's parent-death signal")
def test_a_child_process_ends_with_the_server_that_started_it(tmp_path):
    """Killed mid-compile, the server leaves nothing compiling: the child ends with it (it would
    otherwise go on for about a minute on an empty cache)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], env=env, cwd=twin_warmup.ROOT)
    try:
        deadline = time.monotonic() + 60
        while not (child := _children(parent.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert child, "no child process started"
        time.sleep(8)  # past its imports: compiling
        assert _alive(child[0])
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child[0]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child[0])


def test_the_twins_of_the_named_targets_only_are_compiled():
    """``make kernels`` compiles the twins in two processes, by target: a process asked for the
    network's gives those (the factor graph's learning kernels) and leaves the others
    uncompiled (a fresh process: signatures only from its own calls or its own cache loads)."""
    code = (
        "from lsbcore.backends import chain_groups, factor_learning_kernels, learning_kernels, "
        "rbm_learning_kernels; from lsbcore.samplers import twin_warmup; "
        "twin_warmup.compile_twins(('network',)); "
        "print(*(f'{t.py_func.__module__}:{len(t.signatures)}' for t in chain_groups.TWINS))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = [item.rsplit(":", 1) for item in done.stdout.split()]
    modules = {module for module, _ in counts}
    assert {
        "lsbcore.backends.factor_learning_kernels",
        "lsbcore.backends.rbm_learning_kernels",
    } <= modules
    for module, signatures in counts:
        assert (int(signatures) > 0) == module.endswith("factor_learning_kernels"), counts


def test_an_unknown_kind_is_refused_in_a_sentence(capsys):
    with pytest.raises(SystemExit) as exit_:
        twin_warmup.main(["lattice", "ising"])
    assert exit_.value.code == 2
    assert "no kind 'ising': the kinds are lattice, rbm, network" in capsys.readouterr().err
