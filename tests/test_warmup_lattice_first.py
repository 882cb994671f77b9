"""The warm-up compiles the lattice samplers' kernels first, and the paper page's runs take them
from then on (``warmup.ready("lattice")``), while the RBM's and the networks' still compile."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from app import config as cfgmod
from app import network_targets, rbm_targets, sources, state
from app.config import Config
from lsbcore.samplers import warmup

# In a fresh process: the warm-up up to the RBM's section (stopped there), by when the
# machine's speed is measured, then the paper page's default run, burn-in and mixing on the
# compiled steps, counting numba's compiler lock (taken to compile a kernel or to load it from
# the disk cache): none may be taken.
PROBE = """
import torch
from numba.core import event
from lsbcore.samplers import warmup
from lsbcore.targets.rbm import RBM

class Stop(Exception):
    pass

def stop(cls, *args, **kwargs):
    raise Stop

RBM.random = classmethod(stop)
torch.set_num_threads(1)
try:
    warmup._warm_up()
except Stop:
    pass
assert warmup.ready("lattice") and not warmup.ready("rbm") and not warmup.ready()
assert warmup.site_update_rate() > 0  # a photo's pick needs no more than the lattice's kernels
taken = []

class Lock(event.Listener):
    def on_start(self, e):
        taken.append(e.kind)

    def on_end(self, e):
        pass

event.register("numba:compiler_lock", Lock())
from app import sources, state
from app.config import Config
cfg = Config()
run, _ = state.build_run(cfg, sources.build_problem(cfg))
run.comparison.set_backend("auto")
run.comparison.step(200, learn=True)
run.comparison.start_mixing()
run.comparison.step(200)
assert all(s.backend == "compiled" for s in run.comparison.samplers.values())
print("compiler lock taken", len(taken), "times")
"""


def test_after_the_lattice_section_the_paper_pages_run_compiles_and_loads_nothing():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "compiler lock taken 0 times"


def _unready(monkeypatch) -> None:
    """The warm-up as a fresh install's server has it before its first section ends."""
    monkeypatch.setattr(warmup, "_compiled", type(warmup._compiled)())
    monkeypatch.setattr(warmup, "_sections", {k: type(e)() for k, e in warmup._sections.items()})


def _backends(run) -> set[str]:
    state.advance(run, 0.05, max_steps=3)
    return {s.backend for s in run.comparison.samplers.values()}


def test_each_page_takes_the_compiled_steps_once_its_section_is_ready(monkeypatch):
    """Before the whole warm-up ends: a lattice's run on torch steps until the lattice's
    section is done, then on the compiled ones; a network's on torch until the end (its kernels
    come last). An RBM's never takes torch steps: they slowed the compile beside them (it waits
    for its kernels instead, ``state.waits_for_kernels``)."""
    _unready(monkeypatch)
    cfg = Config(chains=2)
    lattice, _ = state.build_run(cfg, sources.build_problem(cfg))
    network_cfg = replace(cfgmod.defaults_for(target="mn1"), samplers=("barker", "lsb1"))
    network, _ = state.build_network_run(network_cfg, network_targets.preset("mn1", 1e-3), "MN 1")
    rbm_cfg = replace(cfgmod.defaults_for(target="digits-8x8"), chains=2)
    rbm, _ = state.build_rbm_run(rbm_cfg, rbm_targets.load_shipped("digits-8x8"), "digits")
    runs = (lattice, rbm, network)
    rbm_backends = {s.backend for s in rbm.comparison.samplers.values()}
    assert [_backends(r) for r in runs] == [{"torch"}, rbm_backends, {"torch"}]
    assert "torch" not in rbm_backends  # the default six all have compiled steps
    warmup._sections["lattice"].set()
    assert [_backends(r) for r in runs] == [{"compiled"}, rbm_backends, {"torch"}]
    warmup._sections["rbm"].set()
    assert [_backends(r) for r in runs] == [{"compiled"}, rbm_backends, {"torch"}]
    warmup._compiled.set()
    assert _backends(network) == {"compiled"}


def test_the_command_compiles_the_named_sections_and_refuses_unknown_ones(capsys, monkeypatch):
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the command's, not the suite's
    assert warmup.main(["network", "lattice"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["network kernels", "lattice kernels"]
    with pytest.raises(SystemExit) as exit_:
        warmup.main(["lattice", "ising"])
    assert exit_.value.code == 2
    assert "no section 'ising': the sections are lattice, rbm, network" in capsys.readouterr().err


def test_a_failed_warm_up_leaves_no_page_waiting(monkeypatch, caplog):
    """An RBM page's run waits for the warm-up's RBM section; a warm-up that raised would have
    kept it waiting for ever: every kernel compiles at its first use instead, and the log says
    why."""
    _unready(monkeypatch)

    def broken() -> None:
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(warmup, "compile_kernels", broken)
    monkeypatch.setattr(warmup, "TWINS_IN_CHILD", False)
    assert not warmup.ready("rbm")
    warmup.compile_in_background().join(timeout=30)
    assert warmup.ready("rbm") and warmup.ready()
    assert "the warm-up failed" in caplog.text and "no compiler here" in caplog.text
