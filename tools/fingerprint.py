"""Behaviour fingerprint of lsbcore: one SHA-256 per seeded run, to prove a refactor changed
nothing (``python -m tools.fingerprint --out FILE``).

It runs a fixed set of seeded runs on the CPU and hashes, per run, the exact bytes of what the
run ends with: the final states ``x`` and ``log p~(x)`` (and snapshots between its phases), every
counter the sampler offers, the trace buffer its steps filled, its statistics, flip log-ratios
and last proposal, and the state of what it learned or trained (balancing function, ``eta``,
learning history, flow, block proposal network). The runs:

- every registered sampler (``lsbcore.samplers.registry``) on four targets: the paper's case 3
  Ising posterior (``paper_case(3)``, a 30 x 30 periodic lattice, 4 chains), a random pairwise
  network (``PairwiseMRF``, 16 sites), a random RBM (16 visible, 8 hidden units) and a random
  grid factor graph (``grid_network``, 4 x 4), each on the ``"torch"`` and the ``"compiled"``
  backend (``"device"`` needs a GPU: not run). A pair the library refuses (the registry's
  ``refusal`` or a refused backend) is recorded as ``"refused: <its sentence>"`` in place of a
  hash, so a change of what is refused shows too;
- each run takes three phases of ``STEPS`` steps: learning on (learnable samplers; the others
  take plain steps), learning on with a trace buffer (after ``track_statistics``), then frozen
  steps; ``resync_every=RESYNC_EVERY`` so that exact recomputes happen inside the run. The flow
  samplers train their flow ``FLOW_TRAIN_STEPS`` steps first;
- one ``Comparison`` of a few samplers on case 3 (``backend="auto"``, traces every
  ``COMPARISON_THIN`` steps): a learning burn-in, then mixing; it hashes each sampler's traces
  (all but the wall-clock column), marginals and final chains.

Usage, around a refactor that should not change behaviour (on the same machine, same
environment: the point is bit-identical results, so floats are hashed as exact bytes)::

    PYTHONPATH=. python tools/fingerprint.py --out /tmp/fingerprint_before.json
    # ... move the modules ...
    PYTHONPATH=. python tools/fingerprint.py --out /tmp/fingerprint_after.json
    diff /tmp/fingerprint_before.json /tmp/fingerprint_after.json

The JSON holds per run its ``sha256`` (or the refusal), the hash of each part (``parts``: which
of the states, traces, learned parameters... changed) and the counters in plain form
(``counters``: which counter changed). Timings are printed, never written, so two runs of an
unchanged library give identical files.

It imports only names that survive the restructuring: the top-level package ``lsbcore`` and the
registry ``lsbcore.samplers.registry``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import platform
import struct
import sys
import time

import numpy as np
import torch

import lsbcore
import lsbcore.samplers.registry as registry

SEED = 0
N_CHAINS = 4
STEPS = 20  # steps per phase; three phases per run
RESYNC_EVERY = 25  # an exact recompute inside every run (the library's default is 2000)
CASE = 3
CASE_SIDE = 30  # the paper's lattice, as is
SMALL_SIDE = 4  # the small targets have 4 x 4 = 16 sites (flows train cheaply on them)
RBM_HIDDEN = 8
FLOW_TRAIN_STEPS = 5
BACKENDS = ("torch", "compiled")  # "device" needs a GPU
COMPARISON_SAMPLERS = ("barker", "sqrt", "lsb1", "lsb2", "gibbs", "checkerboard", "block-gibbs")
COMPARISON_THIN = 5
COMPARISON_BURN_IN = 20
COMPARISON_MIXING = 30

# what every sampler offers (lsbcore.samplers.interface.ChainSampler), as plain values
COUNTERS = (
    "name",
    "backend",
    "learnable",
    "n_chains",
    "n_sites",
    "n_steps",
    "n_site_updates",
    "n_target_evals",
    "n_accepted",
    "accept_rate",
    "sweeps",
    "evals_per_step",
    "sites_per_step",
    "steps_to_resync",
    "resync_every",
)
# beyond the interface, where a sampler has them: what it learned or was built on
LEARNED_COUNTERS = ("learning_failed", "eta")
MODULES = ("balancing", "flow", "proposal")  # torch modules: hashed by state_dict


# ------------------------------------------------------------------ hashing
def _feed(h, label: str, value) -> None:
    """Feed ``value`` to ``h`` unambiguously: a header (label, kind, dtype, shape, length), then
    its exact bytes; containers recurse in a fixed order."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().contiguous().numpy()
    if isinstance(value, dict):
        _head(h, label, "dict", str(len(value)).encode())
        for key in sorted(value, key=str):
            _feed(h, f"{label}.{key}", value[key])
        return
    if isinstance(value, (list, tuple)):
        _head(h, label, "list", str(len(value)).encode())
        for i, item in enumerate(value):
            _feed(h, f"{label}[{i}]", item)
        return
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        _head(h, label, f"array {array.dtype.str} {array.shape}", array.tobytes())
    elif isinstance(value, (bool, np.bool_)) or value is None:
        _head(h, label, "atom", repr(None if value is None else bool(value)).encode())
    elif isinstance(value, (int, np.integer)):
        _head(h, label, "int", str(int(value)).encode())
    elif isinstance(value, (float, np.floating)):
        _head(h, label, "float", struct.pack("<d", float(value)))
    elif isinstance(value, str):
        _head(h, label, "str", value.encode())
    else:
        raise TypeError(f"{label}: cannot hash a {type(value).__name__}")


def _head(h, label: str, kind: str, payload: bytes) -> None:
    h.update(f"{label}|{kind}|{len(payload)}\0".encode())
    h.update(payload)


def digest(value) -> str:
    h = hashlib.sha256()
    _feed(h, "", value)
    return h.hexdigest()


def plain(value):
    """A counter as JSON writes it exactly: floats by repr (round-trip exact), NaN and the
    infinities as strings."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else repr(value)
    if value is None or isinstance(value, str):
        return value
    return repr(value)


def _read(obj, name: str):
    """``obj.name``, or a string saying why not (a property that raises is recorded, not
    fatal: which properties raise is behaviour too)."""
    try:
        return getattr(obj, name)
    except Exception as err:  # recorded in the fingerprint
        return f"<{type(err).__name__}: {err}>"


# ------------------------------------------------------------------ targets
def _paper_case():
    """``paper_case``: exported by ``lsbcore`` now; should the restructuring drop the export, it
    is looked up in the module that defines it today, then where it may move to."""
    found = getattr(lsbcore, "paper_case", None)
    if found is not None:
        return found
    for module in ("lsbcore.cases", "lsbcore.targets.cases", "lsbcore.studies.experiment.cases"):
        try:
            return importlib.import_module(module).paper_case
        except (ImportError, AttributeError):
            continue
    raise ImportError("paper_case is neither exported by lsbcore nor found in its old module.")


def targets() -> list[tuple[str, object, object, object]]:
    """``(name, target, x0, truth)`` of every target, built from ``SEED``."""
    problem = _paper_case()(CASE, n=CASE_SIDE, n_chains=N_CHAINS, seed=SEED)
    n = SMALL_SIDE * SMALL_SIDE
    generator = torch.Generator().manual_seed(SEED)
    h = torch.randn(n, generator=generator, dtype=torch.float64) * 0.5
    upper = torch.randn(n, n, generator=generator, dtype=torch.float64).triu(1) * 0.3
    mrf = lsbcore.PairwiseMRF(h, upper + upper.T)
    rbm = lsbcore.RBM.random(n_visible=n, n_hidden=RBM_HIDDEN, seed=SEED)
    factors = lsbcore.grid_network(side=SMALL_SIDE, determinism=0.5, seed=SEED)
    return [
        (f"ising-case{CASE}", problem.target, problem.x0, problem.truth),
        ("pairwise-mrf", mrf, None, None),
        ("rbm", rbm, None, None),
        ("factor-graph", factors, None, None),
    ]


# ------------------------------------------------------------------ runs
def sampler_options(name: str) -> dict:
    """The options a run of ``name`` gets beyond its defaults: cheap flow training, and for
    ``"learned"`` a (seeded, non-trivial) balancing function loaded as the app loads one."""
    spec = registry.REGISTRY[name]
    options: dict = {"resync_every": RESYNC_EVERY}
    if any(o.name == "train_steps" for o in spec.options):
        options["train_steps"] = FLOW_TRAIN_STEPS
    if spec.needs_balancing:
        network = lsbcore.make_balancing("lsb2", seed=SEED)
        options["balancing"] = lsbcore.load_balancing(lsbcore.balancing_to_dict(network))
    return options


def learned_parts(sampler) -> dict:
    """What the sampler learned or was built on, where it has it."""
    parts = {}
    for name in MODULES:
        module = getattr(sampler, name, None)
        if isinstance(module, torch.nn.Module):
            parts[name] = module.state_dict()
    eta_raw = getattr(sampler, "eta_raw", None)
    if isinstance(eta_raw, torch.Tensor):
        parts["eta_raw"] = eta_raw
    history = getattr(sampler, "history", None)
    if history is not None and callable(getattr(history, "arrays", None)):
        parts["history"] = history.arrays()
    return parts


def counters(sampler) -> dict:
    values = {name: plain(_read(sampler, name)) for name in COUNTERS}
    for name in LEARNED_COUNTERS:
        if hasattr(type(sampler), name) or name in vars(sampler):
            values[name] = plain(_read(sampler, name))
    return values


def final_parts(sampler) -> dict:
    """The chains' end state as the sampler exposes it."""
    parts = {"x": sampler.x, "log_p": sampler.log_p}
    for name in ("log_ratios", "statistics", "last_proposal"):
        value = _read(sampler, name)
        parts[name] = value if value is not None else "<None>"
    parts.update(learned_parts(sampler))
    return parts


def entry(parts: dict, counter_values: dict) -> dict:
    parts = {**parts, "counters": counter_values}
    hashes = {name: digest(value) for name, value in parts.items()}
    return {"sha256": digest(hashes), "parts": hashes, "counters": counter_values}


def run_sampler(name: str, target, x0, truth, backend: str) -> dict:
    """One sampler on one target and backend: three phases of ``STEPS`` steps, then hashed."""
    reason = registry.refusal(name, target)
    if reason is not None:
        return {"sha256": f"refused: {reason}"}
    spec = registry.REGISTRY[name]
    start = None if spec.takes_flow else x0  # flows start from their flow's draws (Comparison)
    try:
        sampler = lsbcore.make_sampler(
            name, target, N_CHAINS, seed=SEED, x0=start, backend=backend, **sampler_options(name)
        )
    except ValueError as err:  # the library's refusal of a backend (or of anything else)
        return {"sha256": f"refused: {err}"}
    learn = bool(sampler.learnable)
    parts = {}
    sampler.step(STEPS, learn=learn)
    parts["after_learning"] = {"x": sampler.x, "log_p": sampler.log_p}
    sampler.track_statistics(truth)
    trace = torch.zeros(STEPS, N_CHAINS, 5, dtype=torch.float64)
    sampler.step(STEPS, learn=learn, trace=trace)
    parts["trace"] = trace
    parts["after_trace"] = {"x": sampler.x, "log_p": sampler.log_p}
    sampler.step(STEPS)
    parts.update(final_parts(sampler))
    return entry(parts, counters(sampler))


def run_comparison(target, x0, truth) -> dict[str, dict]:
    """``COMPARISON_SAMPLERS`` on case 3 through ``Comparison``: burn-in with learning, then
    mixing with marginals; one entry per sampler."""
    comparison = lsbcore.Comparison(
        list(COMPARISON_SAMPLERS), target, N_CHAINS, seed=SEED, x0=x0, thin=COMPARISON_THIN,
        truth=truth, backend="auto",
    )  # fmt: skip
    comparison.step(COMPARISON_BURN_IN, learn=True)
    comparison.start_mixing()
    comparison.step(COMPARISON_MIXING)
    out = {}
    for name in comparison.names:
        sampler = comparison[name]
        parts = final_parts(sampler)
        records = comparison.traces[name].arrays()
        records.pop("wall_s")  # wall-clock time: the one thing that differs run to run
        parts["trace"] = records
        marginal = comparison.marginals[name]
        parts["marginal"] = {"count": marginal.count, "per_chain": marginal.per_chain()}
        values = counters(sampler)
        values["comparison_steps"] = comparison.n_steps
        values["comparison_phase"] = comparison.phase
        values["trace_records"] = len(comparison.traces[name])
        values["marginal_count"] = marginal.count
        out[name] = entry(parts, values)
    return out


def fingerprint(log=print) -> dict:
    runs: dict[str, dict] = {}

    def record(key: str, result: dict, seconds: float) -> None:
        runs[key] = result
        log(f"{key:48s} {result['sha256'][:64]:64s} {seconds:6.2f} s")

    built = targets()
    for target_name, target, x0, truth in built:
        for name in registry.REGISTRY:
            for backend in BACKENDS:
                began = time.perf_counter()
                result = run_sampler(name, target, x0, truth, backend)
                record(f"{target_name}/{name}/{backend}", result, time.perf_counter() - began)
    target_name, target, x0, truth = built[0]
    began = time.perf_counter()
    results = run_comparison(target, x0, truth)
    seconds = (time.perf_counter() - began) / len(results)
    for name, result in results.items():
        record(f"comparison-{target_name}/{name}/auto", result, seconds)
    return {
        "meta": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "numba": _version("numba"),
            "machine": platform.machine(),
            "samplers": list(registry.REGISTRY),
            "settings": {
                "seed": SEED,
                "n_chains": N_CHAINS,
                "steps_per_phase": STEPS,
                "resync_every": RESYNC_EVERY,
                "case": CASE,
                "case_side": CASE_SIDE,
                "small_side": SMALL_SIDE,
                "flow_train_steps": FLOW_TRAIN_STEPS,
                "backends": list(BACKENDS),
                "comparison": list(COMPARISON_SAMPLERS),
            },
        },
        "runs": runs,
    }


def _version(package: str) -> str | None:
    try:
        return importlib.import_module(package).__version__
    except ImportError:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the fingerprint as JSON to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one thread: reductions in the same order on every run
    began = time.perf_counter()
    result = fingerprint()
    runs = result["runs"].values()
    refused = sum(r["sha256"].startswith("refused:") for r in runs)
    print(
        f"{len(result['runs'])} runs: {len(result['runs']) - refused} hashed, {refused} refused; "
        f"{time.perf_counter() - began:.1f} s",
        file=sys.stderr,
    )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
