"""The public Gibbs-with-Gradients code's samplers, timed on this machine, beside ours.

    python -m tools.gwg_reference --gwg-release /tmp/gwg_release [--compare] [--json]

Issue 23 asks that ``gwg``, ``block-gibbs`` (k = 2) and ``hamming-ball`` (10, 1) reach at least
10x the steps per second of the public code (github.com/wgrathwohl/GWG_release) on an RBM with
100 visible and 25 hidden units in its "random" setting, 100 chains, run side by side. This
tool imports and runs that code from a checkout given by ``--gwg-release`` (nothing is
downloaded here; the test suite never needs it). Get one with

    git clone https://github.com/wgrathwohl/GWG_release /tmp/gwg_release

(or ``git --git-dir=<mirror> archive HEAD | tar -x -C /tmp/gwg_release``). Measured at commit
6441499c (2021-05-27), the latest.

What runs is theirs: ``rbm.BernoulliRBM`` (float32, as there) with the weights of the "random"
setting (drawn by ``lsbcore``'s ``RBM.random``, so that both codes sample one target), and the
samplers exactly as ``rbm_sample.py`` builds them, ``gwg``:
``samplers.DiffSampler(n, 1, fixed_proposal=False, approx=True, multi_hop=False, temp=2.)``,
``bg-2``: ``block_samplers.BlockGibbsSampler(n, 2)``, ``hb-10-1``:
``block_samplers.HammingBallSampler(n, 10, 1)``, stepped as its timed loop does:
``x = sampler.step(x.detach(), model).detach()``, chains started from ``model.init_dist``.
Each figure is the best of ``--repeats`` timed runs of ``--steps`` steps after a warm-up.

``--compare`` also times our samplers on the same weights (``lsbcore.targets.rbm.RBM``,
float64, ``--backend``: ``auto``, the compiled RBM steps of ``lsbcore.backends.rbm_kernels`` on
the CPU, or ``torch``), theirs and ours alternating within each repeat so both see the same load,
and prints the ratio. It then runs both codes through ``rbm_sample.py``'s protocol for the
log-MMD: ``--mmd-steps`` steps (there 5,000) of ``--chains`` chains (there ``--n_test_samples``
100) from uniform starts, the log10 MMD (``lsbcore.diagnostics.mmd``: the exponentiated average
Hamming
kernel, V-statistic, as there) against 500 ground-truth samples of 10,000 Gibbs sweeps
(``lsbcore.rbm.ground_truth``; there ``--n_samples`` 500, ``--gt_steps`` 10,000) every
``--mmd-every`` steps, for ``--mmd-seeds`` seeds, and prints each code's final log-MMD and its
mean over the second half of the run (the chains' stationary level), mean and spread over
seeds, with the floor of exact samples (``noise_floor``).

Compatibility shims, all from here, none in their files: their modules import packages that
the timed code never calls (``tqdm``, ``igraph`` in ``rbm.py``; ``torchvision``,
``matplotlib``, ``sklearn`` through ``utils.py``, ``toy_data.py`` and ``visualize_flow.py``).
Where one is not installed, an empty stand-in module takes its place; touching a stand-in
after the import (while timing) raises, so a figure can never come from a stand-in. No torch
API needed a shim on torch 2.13.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import platform
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

from lsbcore.diagnostics.mmd import log_mmd
from lsbcore.rbm.ground_truth import ground_truth, noise_floor
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.rbm import RBM

#: Packages their modules import at the top but the timed code never calls.
UNUSED_IMPORTS = ("tqdm", "igraph", "torchvision", "matplotlib", "sklearn")
#: Their modules the timing needs (the rest come in through these).
MODULES = ("rbm", "samplers", "block_samplers", "utils")
#: The three samplers of issue 23, named as ``rbm_sample.py`` names them, with our counterparts;
#: the block samplers take their blocks as theirs do: consecutive blocks of a random permutation
#: of the sites, drawn afresh every sweep ("shuffled"; there one permutation serves all chains).
OURS = {
    "gwg": ("gwg", {}),
    "bg-2": ("block-gibbs", {"block_size": 2, "blocks": "shuffled"}),
    "hb-10-1": ("hamming-ball", {"block_size": 10, "radius": 1, "blocks": "shuffled"}),
}


class _Unused:
    """Any name taken from a stand-in module: harmless while their modules import, an error
    once they have (``StandIns.loaded``)."""

    def __init__(self, name: str, stand_ins: StandIns):
        self._name, self._stand_ins = name, stand_ins

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unused(f"{self._name}.{name}", self._stand_ins)

    def __call__(self, *args, **kwargs):
        if self._stand_ins.loaded:
            raise RuntimeError(
                f"the public code called {self._name}, a stand-in for a package that is not "
                "installed; install it to time this code."
            )
        return self


class StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves an empty module for each of ``UNUSED_IMPORTS`` (and their submodules) that no
    other finder has: placed last on ``sys.meta_path``, so an installed package wins."""

    def __init__(self, names=UNUSED_IMPORTS):
        self.names = tuple(names)
        self.served: list[str] = []
        self.loaded = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        stand_ins = self

        def attribute(name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Unused(f"{spec.name}.{name}", stand_ins)

        module.__getattr__ = attribute
        self.served.append(spec.name)
        return module

    def exec_module(self, module):
        pass


def load_public_code(
    checkout, unused_imports=UNUSED_IMPORTS
) -> tuple[dict[str, types.ModuleType], list[str]]:
    """Their modules ``MODULES`` imported from ``checkout``, and the stand-ins served for
    ``unused_imports`` that are not installed."""
    root = Path(checkout).expanduser().resolve()
    missing = [m for m in MODULES if not (root / f"{m}.py").is_file()]
    if missing:
        raise SystemExit(
            f"{root} is not a GWG_release checkout: {', '.join(m + '.py' for m in missing)} "
            "missing (git clone https://github.com/wgrathwohl/GWG_release)."
        )
    clashes = [m for m in MODULES if m in sys.modules]
    if clashes:
        raise SystemExit(f"modules called {clashes} are imported already; run this tool alone.")
    stand_ins = StandIns(unused_imports)
    sys.meta_path.append(stand_ins)
    sys.path.insert(0, str(root))
    modules = {name: importlib.import_module(name) for name in MODULES}
    for name, module in modules.items():
        if Path(module.__file__).resolve().parent != root:
            raise SystemExit(f"{name} was imported from {module.__file__}, not from {root}.")
    stand_ins.loaded = True
    return modules, sorted({name.split(".")[0] for name in stand_ins.served})


def public_model(code, target: RBM, device):
    """Their ``BernoulliRBM`` holding ``target``'s weights (in its own float32)."""
    model = code["rbm"].BernoulliRBM(target.n_visible, target.n_hidden)
    model.W.data = target.W.float()
    model.b_v.data = target.b_visible.float()
    model.b_h.data = target.b_hidden.float()
    return model.to(device)


def public_sampler(code, name: str, n_visible: int):
    """Their sampler ``name`` built as ``rbm_sample.py`` builds it."""
    if name == "gwg":
        return code["samplers"].DiffSampler(
            n_visible, 1, fixed_proposal=False, approx=True, multi_hop=False, temp=2.0
        )
    if name == "bg-2":
        return code["block_samplers"].BlockGibbsSampler(n_visible, 2)
    if name == "hb-10-1":
        return code["block_samplers"].HammingBallSampler(n_visible, 10, 1)
    raise ValueError(f"sampler must be one of {', '.join(OURS)}, got {name!r}.")


def public_stepper(code, name: str, model, n_chains: int, device):
    """``advance(steps)``: their timed loop of ``rbm_sample.py`` on chains from
    ``model.init_dist``."""
    sampler = public_sampler(code, name, model.data_dim)
    state = {"x": model.init_dist.sample((n_chains,)).to(device)}

    def advance(steps: int) -> None:
        x = state["x"]
        for _ in range(steps):
            x = sampler.step(x.detach(), model).detach()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        state["x"] = x

    advance.state = state  # the chains, 0/1, for the log-MMD
    return advance


def best_rates(advances: dict[str, tuple], repeats: int) -> dict[str, float]:
    """Steps per second of each ``advance`` (``{key: (advance, steps)}``): the best of
    ``repeats``, after a warm-up of a tenth of the steps, the keys alternating in each repeat."""
    for advance, steps in advances.values():
        advance(max(1, steps // 10))
    best = dict.fromkeys(advances, float("inf"))
    for _ in range(repeats):
        for key, (advance, steps) in advances.items():
            start = time.perf_counter()
            advance(steps)
            best[key] = min(best[key], time.perf_counter() - start)
    return {key: advances[key][1] / best[key] for key in advances}


def our_sampler(name: str, target, n_chains: int, device, seed: int, backend: str = "auto"):
    """Our counterpart of their sampler ``name`` on ``target``, or the sentence that refuses
    it (not registered yet, or refused for the target or backend)."""
    sampler_name, options = OURS[name]
    try:
        return make_sampler(
            sampler_name, target, n_chains, seed=seed, device=device, backend=backend, **options
        )
    except ValueError as err:
        return str(err)


def log_mmd_runs(args, code, target, model, device) -> dict:
    """``rbm_sample.py``'s log-MMD protocol for both codes (the module docstring): per
    sampler, ``{"public": [...], "ours": [...]}``, one curve per seed of ``(step, log10 MMD)``
    every ``--mmd-every`` steps, step 0 included."""
    truth = ground_truth(target, n_samples=500, steps=10_000, seed=args.seed)
    checkpoints = range(0, args.mmd_steps + 1, args.mmd_every)
    runs = {}
    for name in args.samplers:
        curves = {"public": [], "ours": []}
        for seed in range(args.seed, args.seed + args.mmd_seeds):
            torch.manual_seed(seed)
            np.random.seed(seed)  # noqa: NPY002 (their block samplers draw from numpy's global)
            theirs = public_stepper(code, name, model, args.chains, device)
            ours = our_sampler(name, target, args.chains, device, seed, args.backend)
            if isinstance(ours, str):
                raise SystemExit(ours)
            for key in curves:
                curves[key].append([])
            for step in checkpoints:
                if step > 0:
                    theirs(args.mmd_every)
                    ours.step(args.mmd_every)
                curves["public"][-1].append(log_mmd(theirs.state["x"].cpu(), truth))
                curves["ours"][-1].append(log_mmd(ours.x, truth))
        runs[name] = curves
    floor = noise_floor(target, args.chains, draws=max(2, args.mmd_seeds), seed=args.seed)
    return {"steps": list(checkpoints), "curves": runs, "noise floor": floor}


def summarise(curves: list[list[float]]) -> dict[str, float]:
    """Over seeds: the mean and standard deviation of the final log-MMD and of its mean over
    the second half of the run."""
    final = np.array([c[-1] for c in curves])
    level = np.array([np.mean(c[len(c) // 2 :]) for c in curves])

    def spread(values: np.ndarray) -> float:
        return float(values.std(ddof=1)) if len(values) > 1 else float("nan")

    return {
        "final": float(final.mean()),
        "final sd": spread(final),
        "second half": float(level.mean()),
        "second half sd": spread(level),
    }


def measure(args) -> dict:
    device = torch.device(args.device)
    torch.manual_seed(args.seed)  # their samplers draw from the global generators
    np.random.seed(args.seed)  # noqa: NPY002 (their block samplers draw from numpy's global)
    code, stand_ins = load_public_code(args.gwg_release)
    # the "random" setting of rbm_sample.py (W ~ N(0, 0.05), both biases ~ N(0, 1)), drawn once
    # for both codes
    target = RBM.random(args.visible, args.hidden, args.seed)
    model = public_model(code, target, device)
    load_before = os.getloadavg()[0]
    figures = {}
    for name in args.samplers:
        advances = {"public": (public_stepper(code, name, model, args.chains, device), args.steps)}
        row = {}
        if args.compare:
            ours = our_sampler(name, target, args.chains, device, args.seed, args.backend)
            if isinstance(ours, str):
                row["ours refused"] = ours
            else:
                advances["ours"] = (ours.step, args.steps * args.our_steps_factor)
                row["ours backend"] = ours.backend
        rates = best_rates(advances, args.repeats)
        row["public steps/s"] = rates["public"]
        if "ours" in rates:
            row["ours steps/s"] = rates["ours"]
            row["ratio"] = rates["ours"] / rates["public"]
        figures[name] = row
    mmd_runs = None
    if args.compare and args.mmd_steps > 0:
        mmd_runs = log_mmd_runs(args, code, target, model, device)
        for name, curves in mmd_runs["curves"].items():
            figures[name]["log-MMD"] = {key: summarise(c) for key, c in curves.items()}
    info = {
        "workload": f"RBM {args.visible} x {args.hidden}, random weights, {args.chains} chains",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load average (1 min) before, after": [load_before, os.getloadavg()[0]],
        "steps": args.steps,
        "repeats": args.repeats,
        "stand-ins for unused imports": stand_ins,
        "public code": str(Path(args.gwg_release).resolve()),
    }
    if mmd_runs is not None:
        info["log-MMD protocol"] = (
            f"{args.mmd_steps} steps, every {args.mmd_every}, {args.mmd_seeds} seeds, against "
            "500 samples of 10,000 Gibbs sweeps"
        )
        info["log-MMD noise floor"] = mmd_runs["noise floor"]
    return {"info": info, "figures": figures, "log-MMD curves": mmd_runs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gwg-release", required=True, help="a GWG_release checkout")
    parser.add_argument("--samplers", default=",".join(OURS), help="of " + ", ".join(OURS))
    parser.add_argument("--compare", action="store_true", help="also time ours, alternating")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--visible", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=25)
    parser.add_argument("--steps", type=int, default=300, help="steps of theirs per repeat")
    parser.add_argument(
        "--our-steps-factor", type=int, default=10, help="ours take this many times more steps"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--backend", default="auto", choices=("auto", "torch", "compiled"), help="of ours"
    )
    parser.add_argument(
        "--mmd-steps", type=int, default=5000, help="log-MMD run (with --compare); 0: none"
    )
    parser.add_argument("--mmd-every", type=int, default=100, help="log-MMD checkpoints")
    parser.add_argument("--mmd-seeds", type=int, default=3, help="log-MMD runs per sampler")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    args.samplers = tuple(args.samplers.split(","))
    unknown = sorted(set(args.samplers) - set(OURS))
    if unknown:
        parser.error(f"--samplers must be among {', '.join(OURS)}, got {unknown}.")
    if min(args.threads, args.chains, args.visible, args.hidden, args.repeats) < 1:
        parser.error("--threads, --chains, --visible, --hidden and --repeats must be >= 1.")
    if args.steps < 10 or args.our_steps_factor < 1:
        parser.error("--steps must be at least 10 and --our-steps-factor at least 1.")
    if args.mmd_steps < 0 or args.mmd_every < 1 or args.mmd_seeds < 1:
        parser.error("--mmd-steps must be >= 0, --mmd-every and --mmd-seeds >= 1.")
    if args.mmd_steps % args.mmd_every:
        parser.error("--mmd-steps must be a multiple of --mmd-every.")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda was asked for but no CUDA GPU is available.")
    torch.set_num_threads(args.threads)
    result = measure(args)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    info = result["info"]
    print(
        f"{info['workload']}; {info['device']}, torch {info['torch']}, {info['threads']} "
        f"thread(s), load {info['load average (1 min) before, after'][0]:.2f} -> "
        f"{info['load average (1 min) before, after'][1]:.2f}; stand-ins: "
        f"{', '.join(info['stand-ins for unused imports']) or 'none'}"
    )
    for name, row in result["figures"].items():
        text = f"  {name:8s} public {row['public steps/s']:9.1f} steps/s"
        if "ours steps/s" in row:
            text += f"   ours {row['ours steps/s']:9.1f} steps/s   ratio {row['ratio']:6.1f}x"
            text += f"   ({row['ours backend']})"
        elif "ours refused" in row:
            text += f"   ours: {row['ours refused']}"
        print(text)
    if result["log-MMD curves"] is not None:
        print(
            f"log10 MMD, {info['log-MMD protocol']}; floor of exact samples "
            f"{info['log-MMD noise floor']:.3f}; mean (sd) over seeds:"
        )
        for name, row in result["figures"].items():
            for key, fig in row["log-MMD"].items():
                print(
                    f"  {name:8s} {key:6s}  final {fig['final']:7.3f} ({fig['final sd']:.3f})"
                    f"   second half {fig['second half']:7.3f} ({fig['second half sd']:.3f})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
