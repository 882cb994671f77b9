"""``python -m lsbcore.experiment --target markov-networks``: the paper's UAI experiment (Table 3)
on MN 1 and MN 2 as the product generates them, the escape figures and the monotone network's
fit to max(1, t), written as a generated section of ``docs/reproduction.md``.

Per network and balancing sampler (``protocol.SAMPLERS``), per seed: 5 chains from uniform
random starts (every state has positive mass at epsilon = 1e-3), burn-in 500 iterations (the
learned ones learn, Adam lr 1e-2), then 10,000 sampling iterations, frozen; the paper ESS of
each chain's magnetisation ``sum_i x_i`` (lag window 500, threshold 0.05: the Ising
reproduction's statistic and settings). The fixed functions' trials share nothing but a batch:
their 5 seeds' chains run as one sampler of 25 independent chains (each seed's 5 starts its own),
which is the same chains at a fifth of the overhead; the learned ones run seed by seed, since
their learning averages over their batch of 5.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from lsbcore import out_path
from lsbcore.balancing.functions import make_balancing
from lsbcore.bounded_json import read_capped
from lsbcore.diagnostics.mixing import PAPER_MAX_LAG, ess_paper
from lsbcore.networks.presets import PRESETS, preset
from lsbcore.out_path import write_text
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.studies.networks import protocol
from lsbcore.studies.networks.escape import escape_times, g_at_zero
from lsbcore.studies.networks.report import section, write_section
from lsbcore.studies.shared.arguments import int_in
from lsbcore.studies.shared.commit import commit
from lsbcore.studies.shared.shown_command import shown_command

#: Points of the monotone network's fit to max(1, t) shown in the report.
FIT_T = (1e-4, 1e-2, 0.5, 1.0, 2.0, 1e2, 1e4)


def _magnetisation(sampler, steps: int) -> np.ndarray:
    """``steps`` frozen iterations; each chain's magnetisation after each, ``[B, steps]``."""
    sampler.track_statistics()
    buffer = torch.empty(steps, sampler.n_chains, 5, dtype=torch.float64)
    sampler.step(steps, trace=buffer)
    return buffer[:, :, 1].T.numpy().copy()


def run_sampler(target, name: str, seeds, burn_in: int, steps: int, chains: int) -> dict:
    """One sampler on one network over ``seeds``: per-seed mean ESS, per-chain ESS, acceptance,
    evaluations per chain and (learned ones) g(0) after learning."""
    lag = min(PAPER_MAX_LAG, steps - 1)
    options = dict(protocol.LEARNING) if REGISTRY[name].learnable else {}
    per_seed, per_chain, accept, g0, failed, evals = [], [], [], [], 0, 0
    if not REGISTRY[name].learnable:
        x0 = torch.cat([uniform_start(target.shape, chains, s) for s in seeds])
        sampler = make_sampler(name, target, len(x0), seed=seeds[0], x0=x0, backend="torch")
        sampler.step(burn_in)
        ess = ess_paper(_magnetisation(sampler, steps), max_lag=lag)
        per_chain = ess.tolist()
        per_seed = [float(ess[i * chains : (i + 1) * chains].mean()) for i in range(len(seeds))]
        accept, evals = [sampler.accept_rate], sampler.n_target_evals
        g0 = [g_at_zero(sampler.balancing)]
    else:
        for seed in seeds:
            x0 = uniform_start(target.shape, chains, seed)
            sampler = make_sampler(
                name, target, chains, seed=seed, x0=x0, backend="torch", **options
            )
            sampler.step(burn_in, learn=True)
            failed += bool(sampler.learning_failed)
            g0.append(g_at_zero(sampler.balancing))
            ess = ess_paper(_magnetisation(sampler, steps), max_lag=lag)
            per_chain += ess.tolist()
            per_seed.append(float(ess.mean()))
            accept.append(sampler.accept_rate)
            evals = sampler.n_target_evals
    return {
        "ess_by_seed": per_seed,
        "ess_mean": float(np.mean(per_seed)),
        "ess_seed_sd": float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else None,
        "ess_chain_sd": float(np.std(per_chain)),
        "accept_rate": float(np.mean(accept)),
        "evals_per_chain": int(evals),
        "g0": float(np.mean(g0)),
        "learning_failed": failed,
        "max_lag": lag,
    }


def monotone_fit(steps: int, seed: int = 0) -> dict:
    """LSB 2''s 20 x 20 monotone network fitted to max(1, t) (the arXiv appendix 15)."""
    # from the start the sampler itself takes (near sqrt(t)), as the appendix trains its network
    h = make_balancing(
        "lsb2-monotone", seed=seed, groups=protocol.PAPER["groups"], units=protocol.PAPER["units"]
    )
    error = h.fit_max(steps=steps)
    t = np.asarray(FIT_T)
    return {
        "steps": steps,
        "max_log_error": error,
        "t": t.tolist(),
        "g": h.g(t).tolist(),
        "target": np.maximum(1.0, t).tolist(),
        "g0": h.g0(),
    }


def run(networks, seeds, burn_in, steps, chains, escape, fit_steps, log=print) -> dict:
    """Everything the section reports, as plain data."""

    results = {"networks": {}, "escape": {}, "seconds": 0.0, "commit": commit()}
    started = time.perf_counter()
    for net in networks:
        target = preset(net)
        skeleton = preset(net, epsilon=0)
        table, escapes = {}, {}
        for name in protocol.SAMPLERS:
            log(f"{net}: {name} (protocol)")
            table[name] = run_sampler(target, name, seeds, burn_in, steps, chains)
            log(f"{net}: {name} (escape)")
            found = escape_times(
                target, skeleton, name, escape["chains"], range(escape["seeds"]), escape["steps"],
                name=net,
            )  # fmt: skip
            escapes[name] = found.summary()
        results["networks"][net] = table
        results["escape"][net] = escapes
    log("monotone network: fit to max(1, t)")
    results["fit"] = monotone_fit(fit_steps)
    results["seconds"] = time.perf_counter() - started
    return results


# ----------------------------------------------------------------------------- the command
class _Parser(argparse.ArgumentParser):
    """Refusals as one sentence on stderr (exit 2), never a traceback."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message[0].upper()}{message[1:].rstrip('.')}.\n")


def _networks(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PRESETS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"choose networks from {', '.join(PRESETS)} (comma-separated), got {text!r}"
        )
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m lsbcore.experiment --target markov-networks",
        description="The LSB paper's UAI experiment (Table 3) on MN 1 and MN 2 as the product "
        "generates them, the escape of random starts into the support, and LSB 2''s monotone "
        "network fitted to max(1, t); written as a section of docs/reproduction.md.",
        epilog=f"Paper protocol (default): burn-in {protocol.PAPER['burn_in']}, "
        f"{protocol.PAPER['steps']:,} sampling iterations, {protocol.PAPER['chains']} chains, "
        f"{protocol.PAPER['trials']} seeds. --quick: burn-in {protocol.QUICK['burn_in']}, "
        f"{protocol.QUICK['steps']} iterations (a check of the pipeline, not a reproduction).",
    )
    parser.add_argument("--target", choices=("markov-networks",), required=True)
    parser.add_argument("--quick", action="store_true", help="a check in seconds")
    parser.add_argument(
        "--seeds", type=int_in(1, 20), help=f"trials 0..N-1 (default {protocol.PAPER['trials']})"
    )
    parser.add_argument(
        "--networks", type=_networks, default=list(protocol.NETWORKS),
        help="comma-separated, from: mn1, mn2 (default both)",
    )  # fmt: skip
    parser.add_argument(
        "--docs", type=out_path.output_file, default="docs/reproduction.md",
        help="the Markdown file whose generated section is written (docs/reproduction.md)",
    )  # fmt: skip
    parser.add_argument(
        "--json", type=out_path.output_file, help="also write the results as JSON here"
    )
    parser.add_argument(
        "--from-json", type=Path,
        help="write the section from a --json file of an earlier run (no sampling)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true")
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    docs = args.docs
    if docs.suffix.lower() != ".md":
        parser.error(f"--docs must name a Markdown file (.md), got {str(docs)!r}")
    if args.from_json is not None:
        return _from_json(parser, args, docs)
    length = protocol.QUICK if args.quick else protocol.PAPER
    seeds = list(range(args.seeds or (2 if args.quick else protocol.PAPER["trials"])))
    escape = dict(protocol.ESCAPE)
    if args.quick:
        quick = protocol.QUICK
        escape = {"chains": quick["escape_chains"], "steps": quick["escape_steps"], "seeds": 1}
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    torch.set_num_threads(1)  # 5 chains of 100 variables: one thread is the fastest
    results = run(
        args.networks, seeds, length["burn_in"], length["steps"], length["chains"], escape,
        fit_steps=60 if args.quick else 300, log=log,
    )  # fmt: skip
    results["config"] = {
        "command": shown_command(argv),
        "quick": args.quick,
        "seeds": seeds,
        "burn_in": length["burn_in"],
        "steps": length["steps"],
        "chains": length["chains"],
        "escape": escape,
        "networks": args.networks,
    }

    if args.json is not None:
        try:
            write_text(args.json, json.dumps(results, indent=1))
        except OSError as err:
            print(f"could not write {args.json}: {err.strerror or err}.", file=sys.stderr)
            return 1
    return _write(docs, results, log)


def _write(docs: Path, results: dict, log) -> int:

    try:
        write_section(docs, section(results))
    except OSError as err:
        print(f"could not write {docs}: {err.strerror or err}.", file=sys.stderr)
        return 1
    log(f"wrote the markov-networks section of {docs}")
    return 0


FROM_JSON_MAX_BYTES = 50 * 2**20  # read at most this: /dev/zero or a huge file would not end


def _from_json(parser, args, docs: Path) -> int:
    """The section from an earlier run's ``--json`` file."""
    try:
        results = json.loads(read_capped(args.from_json, FROM_JSON_MAX_BYTES))
    except (OSError, ValueError) as err:  # ValueError: too large, not UTF-8, not JSON
        parser.error(f"--from-json {str(args.from_json)!r} could not be read as JSON ({err})")
    needed = ("config", "networks", "escape", "fit", "seconds")
    if not isinstance(results, dict) or any(k not in results for k in needed):
        parser.error(f"--from-json {str(args.from_json)!r} is not a results file of this command")
    return _write(docs, results, lambda m: None if args.quiet else print(m, file=sys.stderr))


__all__ = ["build_parser", "main", "monotone_fit", "run", "run_sampler"]
