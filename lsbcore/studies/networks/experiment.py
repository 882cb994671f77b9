"""``python -m lsbcore.experiment --target markov-networks``: the paper's UAI experiment (Table 3)
on MN 1 and MN 2 as the product generates them, the escape figures, the g(0) comparison and the
monotone network's fit to max(1, t), written as a generated section of ``docs/reproduction.md``.

By default the setup is the authors' UAI scripts' (``protocol.AUTHORS``; each item an option):
per network, sampler and seed, 5 chains start with every variable at 0 (``--start``); burn-in
500 iterations, in which the learned functions learn (SGD with momentum, lr 1e-4; LSB 2 the
monotone network started at max(1, t) with the authors' monotonicity penalty); then every
sampler's 10,000 frozen sampling iterations start from the states sqrt(t)'s chains reached at
the end of burn-in (``--mixing-start``); the paper ESS of each chain's magnetisation
``sum_i x_i``, lag window 400 (``--lag``), threshold 0.05. The fixed functions' trials share
nothing but a batch: their 5 seeds' chains run as one sampler of 25 independent chains; the
learned ones run seed by seed, since their learning averages over their batch of 5.
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
from lsbcore.balancing.functions import FixedBalancing, PinnedZeroBalancing, make_balancing
from lsbcore.bounded_json import read_capped
from lsbcore.diagnostics.mixing import ess_paper
from lsbcore.networks.presets import PRESETS, preset
from lsbcore.out_path import write_text
from lsbcore.samplers.base import uniform_start
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.studies.networks import convergence, protocol
from lsbcore.studies.networks.escape import escape_times, g_at_zero
from lsbcore.studies.networks.report import section, write_section
from lsbcore.studies.shared.arguments import float_in, int_in
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


def start_states(shape, chains: int, seeds, start: str) -> torch.Tensor:
    """Every seed's ``chains`` starts, ``[len(seeds) * chains, *shape]``: all variables at 0
    (``-1`` in the product's +-1 states; the authors' start, whose evidence our generated
    networks do not have) or uniform random (each seed its own)."""
    if start not in protocol.STARTS:
        raise ValueError(f"start must be one of {', '.join(protocol.STARTS)}, got {start!r}.")
    if start == "zeros":
        return torch.full((len(seeds) * chains, *shape), -1.0, dtype=torch.float64)
    return torch.cat([uniform_start(shape, chains, s) for s in seeds])


def sampler_options(name: str, settings: dict) -> dict:
    """The registry options ``settings`` gives sampler ``name``: the optimiser and its rate to
    every learned one, LSB 2''s ``init`` and ``monotonicity`` to the monotone network only."""
    if name not in REGISTRY or not REGISTRY[name].learnable:
        return {}
    options = {"optimizer": settings["optimizer"], "lr": settings["lr"]}
    if name == "lsb2-monotone":
        options.update({k: settings[k] for k in protocol.MONOTONE_ONLY})
    return options


def build(name: str, target, x0: torch.Tensor, seed: int, settings: dict):
    """Sampler ``name`` on ``target`` from ``x0``: a registry sampler, or ``"max-g0-zero"``
    (max(1, t) with g(0) pinned to 0, frozen)."""
    if name == "max-g0-zero":
        pinned = PinnedZeroBalancing(FixedBalancing("max"))
        return make_sampler(
            "learned", target, len(x0), seed=seed, x0=x0, backend=protocol.BACKEND, balancing=pinned
        )
    options = sampler_options(name, settings)
    return make_sampler(
        name, target, len(x0), seed=seed, x0=x0, backend=protocol.BACKEND, **options
    )


def sqrt_burn_in(target, x0: torch.Tensor, seed: int, burn_in: int) -> torch.Tensor:
    """The states sqrt(t)'s chains reach after ``burn_in`` iterations from ``x0``: where the
    authors restart every sampler's mixing."""
    sampler = make_sampler("sqrt", target, len(x0), seed=seed, x0=x0, backend=protocol.BACKEND)
    sampler.step(burn_in)
    return sampler.x.detach().clone()


def run_sampler(
    target, name: str, seeds, burn_in: int, steps: int, chains: int, settings: dict,
    x0: torch.Tensor, mixing_x0: torch.Tensor | None = None,
) -> dict:  # fmt: skip
    """One sampler on one network over ``seeds``, chains from ``x0`` (``[seeds * chains, ...]``):
    burn-in (learning, for learned ones), then the sampling iterations from ``mixing_x0`` where
    given (the authors: sqrt(t)'s burn-in states), else from where burn-in left the chains.
    Per-seed mean ESS, per-chain ESS, acceptance, evaluations per chain, g(0) after learning."""
    lag = min(settings["lag"], steps - 1)
    learnable = name in REGISTRY and REGISTRY[name].learnable
    per_seed, per_chain, accept, g0, failed, evals = [], [], [], [], 0, 0
    if not learnable:
        sampler = build(name, target, x0, seeds[0], settings)
        if mixing_x0 is None:
            sampler.step(burn_in)
        else:  # its own burn-in would be discarded: mixing starts from sqrt(t)'s states
            sampler.set_state(mixing_x0)
        ess = ess_paper(_magnetisation(sampler, steps), max_lag=lag)
        per_chain = ess.tolist()
        per_seed = [float(ess[i * chains : (i + 1) * chains].mean()) for i in range(len(seeds))]
        accept, evals = [sampler.accept_rate], sampler.n_target_evals
        g0 = [g_at_zero(sampler.balancing)]
    else:
        for n, seed in enumerate(seeds):
            part = slice(n * chains, (n + 1) * chains)
            sampler = build(name, target, x0[part], seed, settings)
            sampler.step(burn_in, learn=True)
            failed += bool(sampler.learning_failed)
            g0.append(g_at_zero(sampler.balancing))
            if mixing_x0 is not None:
                sampler.set_state(mixing_x0[part])
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


def figure5(networks, seeds, quick: bool, settings: dict, log=print) -> dict:
    """Figure 5's measurement (``convergence.run``) under ``settings``."""
    size = protocol.FIGURE5_QUICK if quick else protocol.FIGURE5
    long_run = {"chains": size["long_chains"], "steps": size["long_steps"]}
    return convergence.run(
        networks, seeds, size["iterations"], protocol.PAPER["chains"], long_run, settings,
        make=lambda n, t, x, seed: build(n, t, x, seed, settings),
        starts=lambda shape, chains, seed: start_states(shape, chains, [seed], settings["start"]),
        log=log,
    )  # fmt: skip


def run(networks, seeds, burn_in, steps, chains, escape, fit_steps, settings=None, log=print):
    """Everything the section reports, as plain data (``settings``: ``protocol.AUTHORS`` with
    the options changed)."""
    settings = {**protocol.AUTHORS, **(settings or {})}
    results = {"networks": {}, "escape": {}, "seconds": 0.0, "commit": commit()}
    started = time.perf_counter()
    for net in networks:
        target = preset(net)
        skeleton = preset(net, epsilon=0)
        x0 = start_states(target.shape, chains, seeds, settings["start"])
        mixing_x0 = None
        if settings["mixing_start"] == "sqrt-burn-in":
            log(f"{net}: sqrt(t)'s burn-in (every sampler's mixing starts there)")
            mixing_x0 = sqrt_burn_in(target, x0, seeds[0], burn_in)
        table, escapes = {}, {}
        for name in (*protocol.SAMPLERS, protocol.G0_PAIR[1]):
            log(f"{net}: {name} (protocol)")
            table[name] = run_sampler(
                target, name, seeds, burn_in, steps, chains, settings, x0, mixing_x0
            )
            log(f"{net}: {name} (escape)")
            found = escape_times(
                target, skeleton, name, escape["chains"], range(escape["seeds"]), escape["steps"],
                name=net, make=lambda n, t, x, seed: build(n, t, x, seed, settings),
            )  # fmt: skip
            escapes[name] = found.summary()
        results["networks"][net] = table
        results["escape"][net] = escapes
    results["figure5"] = figure5(
        networks, seeds, burn_in < protocol.PAPER["burn_in"], settings, log
    )
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
    authors = protocol.AUTHORS
    setup = parser.add_argument_group(
        "setup", "the authors' UAI scripts' values are the defaults; each option departs from them"
    )
    setup.add_argument(
        "--start", choices=protocol.STARTS, default=authors["start"],
        help="chains start with every variable at 0 (authors) or uniformly at random",
    )  # fmt: skip
    setup.add_argument(
        "--mixing-start", choices=protocol.MIXING_STARTS, default=authors["mixing_start"],
        help="sampling starts from sqrt(t)'s burn-in states (authors) or each sampler's own",
    )  # fmt: skip
    setup.add_argument(
        "--lag", type=int_in(1, 10_000), default=authors["lag"],
        help=f"ESS lag window (authors {authors['lag']})",
    )  # fmt: skip
    setup.add_argument(
        "--optimizer", choices=("sgd", "adam"), default=authors["optimizer"],
        help="learning: SGD with momentum 0.9 (authors) or Adam",
    )  # fmt: skip
    setup.add_argument(
        "--lr", type=float_in(0.0, 1.0, low_open=True), default=authors["lr"],
        help=f"learning rate (authors {authors['lr']:g})",
    )  # fmt: skip
    setup.add_argument(
        "--monotonicity", choices=("penalty", "projection"), default=authors["monotonicity"],
        help="LSB 2: the authors' penalty on t h(1/t) decreasing, or slopes projected to [0, 1]",
    )  # fmt: skip
    setup.add_argument(
        "--init", choices=("max", "sqrt"), default=authors["init"],
        help="LSB 2 starts at max(1, t) (authors) or near sqrt(t)",
    )  # fmt: skip
    parser.add_argument(
        "--only", choices=("figure5",),
        help="figure5: run only Figure 5's measurement and rewrite only its subsection of the "
        "markov-networks section of --docs (which must have that section)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true")
    return parser


def settings_of(args) -> dict:
    """The setup options of parsed ``args``, keyed as ``protocol.AUTHORS``."""
    return {key: getattr(args, key) for key in protocol.AUTHORS}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    docs = args.docs
    if docs.suffix.lower() != ".md":
        parser.error(f"--docs must name a Markdown file (.md), got {str(docs)!r}")
    if args.only is not None and (args.from_json is not None or args.json is not None):
        parser.error("--only figure5 rewrites its subsection from its own runs; it cannot be "
                     "combined with --from-json or --json")  # fmt: skip
    if args.from_json is not None:
        return _from_json(parser, args, docs)
    if args.only is not None:
        return _only_figure5(parser, args, argv, docs)
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
        fit_steps=60 if args.quick else 300, settings=settings_of(args), log=log,
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
        "settings": settings_of(args),
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


def _only_figure5(parser, args, argv, docs: Path) -> int:
    """Figure 5's subsection alone, put into the markov-networks section of ``docs``."""
    from lsbcore.studies.networks.report import END

    try:
        doc = docs.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        doc = ""
    if END not in doc:
        parser.error(
            f"--only figure5 needs the markov-networks section in --docs {str(docs)!r}; run the "
            "command without --only first"
        )
    seeds = list(range(args.seeds or (2 if args.quick else protocol.PAPER["trials"])))
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    torch.set_num_threads(1)
    fig = figure5(args.networks, seeds, args.quick, settings_of(args), log)
    try:
        write_text(docs, convergence.put(doc, convergence.section(fig, shown_command(argv)), END))
    except OSError as err:
        print(f"could not write {docs}: {err.strerror or err}.", file=sys.stderr)
        return 1
    log(f"wrote the Figure 5 subsection of {docs}")
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


__all__ = [
    "build", "build_parser", "figure5", "main", "monotone_fit", "run", "run_sampler",
    "sampler_options", "settings_of", "sqrt_burn_in", "start_states",
]  # fmt: skip
