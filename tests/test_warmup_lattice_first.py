"""The warm-up compiles the lattice samplers' kernels first, and the paper page's runs take them
from then on (``warmup.ready(lattice=True)``), while the RBM's and the networks' still compile."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from app import config as cfgmod
from app import network_targets, sources, state
from app.config import Config
from lsbcore.samplers import warmup

# In a fresh process: the warm-up up to the RBM's section (stopped there), then the paper
# page's default run, burn-in and mixing on the compiled steps, counting numba's compiler lock
# (taken to compile a kernel or to load it from the disk cache): none may be taken.
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
assert warmup.ready(lattice=True) and not warmup.ready()
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


def test_the_page_takes_the_compiled_steps_on_a_lattice_once_its_kernels_are_ready(monkeypatch):
    """Before the whole warm-up ends: a lattice's run on the compiled steps, a network's on
    torch (its kernels come later)."""
    monkeypatch.setattr(warmup, "_compiled", type(warmup._compiled)())
    monkeypatch.setattr(warmup, "_lattice", type(warmup._lattice)())
    cfg = Config(chains=2)
    lattice, _ = state.build_run(cfg, sources.build_problem(cfg))
    network_cfg = replace(cfgmod.defaults_for(target="mn1"), samplers=("barker", "lsb1"))
    network, _ = state.build_network_run(network_cfg, network_targets.preset("mn1", 1e-3), "MN 1")

    def backends(run):
        state.advance(run, 0.05, max_steps=3)
        return {s.backend for s in run.comparison.samplers.values()}

    assert backends(lattice) == {"torch"} and backends(network) == {"torch"}
    warmup._lattice.set()
    assert backends(lattice) == {"compiled"} and backends(network) == {"torch"}
    warmup._compiled.set()
    assert backends(network) == {"compiled"}


def test_the_command_compiles_the_named_sections_and_refuses_unknown_ones(capsys, monkeypatch):
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the command's, not the suite's
    assert warmup.main(["network", "lattice"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["network kernels", "lattice kernels"]
    with pytest.raises(SystemExit) as exit_:
        warmup.main(["lattice", "ising"])
    assert exit_.value.code == 2
    assert "no section 'ising': the sections are lattice, rbm, network" in capsys.readouterr().err
