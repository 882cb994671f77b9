"""The experiment's command line (``python -m lsbcore.experiment``): arguments, their
validation, ``main`` and the summary it prints."""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from lsbcore import interrupt, out_path
from lsbcore.backends import BACKENDS, resolve_backend, resolve_device
from lsbcore.cases import NOISE_MODELS, PAPER_CASES
from lsbcore.image import MAX_BYTES as MAX_IMAGE_BYTES
from lsbcore.image import ImageError, load_image
from lsbcore.samplers.registry import HIDDEN, LEARN_OPTIONS, REGISTRY
from lsbcore.studies.experiment import output
from lsbcore.studies.experiment.paper_protocol import PROTOCOLS, resolve_protocol
from lsbcore.studies.experiment.report import PAPER_TABLE2, fmt
from lsbcore.studies.experiment.run import build_problem, log_message, run_experiment
from lsbcore.studies.shared.arguments import add_option_arguments, float_in, int_in

__all__ = ["CHOICES", "DEFAULT_SAMPLERS", "build_parser", "main"]

#: Samplers selectable here: every registered one except those built from a balancing-function
#: file ("learned"), which is for the dashboard.
CHOICES = tuple(n for n, spec in REGISTRY.items() if spec.app and not spec.needs_balancing)
#: The samplers of the paper's Table 2, run by default: the locally balanced ones.
DEFAULT_SAMPLERS = tuple(n for n in CHOICES if REGISTRY[n].balanced)
PAPER_CHAINS, PAPER_SIZE, PAPER_STEPS = 30, 30, 30_000
IMAGE_CHAINS, IMAGE_SIZE, IMAGE_BURN_IN, IMAGE_STEPS = 4, 64, 500, 5000
MAX_CHAINS, MAX_SIZE, MAX_STEPS = 1000, 256, 1_000_000
MAX_SEEDS = 20
STARTS = {"per-chain": "per_chain", "shared": "shared"}  # flag value -> paper_case's start
INTERRUPTED = (130, 143)  # exit codes after SIGINT and SIGTERM (128 + the signal's number)
MAX_TRACE_VALUES = 100_000_000  # records x chains x samplers: 1.2 GB of float32 traces


# ============================================================================ command line


def _sampler_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one sampler name")
    unknown = [n for n in names if n not in CHOICES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown sampler(s) {', '.join(map(repr, unknown))}; choose from: {', '.join(CHOICES)}"
        )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise argparse.ArgumentTypeError(f"sampler(s) listed twice: {', '.join(duplicates)}")
    return names


def _default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.experiment",
        description="Compare locally balanced samplers on one of the paper's Ising problems or "
        "on an image, and write results.json, traces.csv, learned_<name>.json and report.html.",
        epilog="Defaults for --case are the paper's settings (30 chains, 30x30, burn-in 2000, "
        f"30000 mixing steps); for --image: {IMAGE_CHAINS} chains, longest side {IMAGE_SIZE}, "
        f"burn-in {IMAGE_BURN_IN}, {IMAGE_STEPS} mixing steps.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--case", type=int, choices=sorted(PAPER_CASES), help="the paper's synthetic case"
    )
    source.add_argument("--image", type=Path, help="segment this image (PNG, JPEG, ...)")
    parser.add_argument(
        "--samplers",
        type=_sampler_list,
        default=list(DEFAULT_SAMPLERS),
        help=f"comma-separated, from: {', '.join(CHOICES)} (default: {','.join(DEFAULT_SAMPLERS)})",
    )
    parser.add_argument("--chains", type=int_in(1, MAX_CHAINS), help="chains per sampler")
    parser.add_argument(
        "--size", type=int_in(3, MAX_SIZE), help="lattice side (case) or longest side (image)"
    )
    parser.add_argument(
        "--burn-in", type=int_in(0, MAX_STEPS), help="burn-in iterations (learning)"
    )
    parser.add_argument("--steps", type=int_in(1, MAX_STEPS), help="mixing iterations")
    parser.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0)
    parser.add_argument(
        "--seeds",
        type=int_in(1, MAX_SEEDS),
        default=1,
        help="run seeds SEED .. SEED+N-1 (each a new problem, start and sampler generators); "
        "results.json gives the ESS mean over seeds and chains and its spread over seeds; "
        "traces.csv, learned files and the report's traces come from the first seed (default 1)",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="spec",
        help="spec (default): the published protocol, ESS of the mixing phase with L=500; "
        "authors: the authors' scripts: burn-in 2000/800/2000/800 for cases 1-4, ESS from "
        "half-way through burn-in with L=500/400/500/100, LSB 2 stepped twice per burn-in "
        "iteration (--case only)",
    )
    parser.add_argument(
        "--lsb2-burnin-steps",
        type=int,
        choices=(1, 2),
        help="--case only: LSB 2's steps per burn-in iteration (default: the protocol's, 2 under "
        "authors as their runner does, else 1), to see what the double step contributes",
    )
    parser.add_argument(
        "--start",
        choices=tuple(STARTS),
        default="per-chain",
        help="--case only: every chain from its own random start (default, as the authors' "
        "runner) or all from one shared start",
    )
    parser.add_argument(
        "--noise-model",
        choices=NOISE_MODELS,
        default="uniform",
        help="--case only: how each chain's noisy alpha is drawn: uniform (default, the authors' "
        "code, behind Table 2: alpha = mu * truth + U(-sigma, sigma)) or gaussian (the paper's "
        "text: y = mu * truth + N(0, sigma^2), alpha = mu * y / sigma^2)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="where steps run: compiled CPU loops, torch, or auto (compiled on the CPU); "
        "both give the same chains",
    )
    parser.add_argument(
        "--thin", type=int_in(1, MAX_STEPS), default=1, help="record every THIN steps (default 1)"
    )
    parser.add_argument(
        "--csv-thin",
        type=int_in(1, MAX_STEPS),
        default=10,
        help="write every N-th recorded mixing step to traces.csv (default 10: the paper run "
        "gives 69 MB instead of 446 MB; 1 writes all; burn-in is always complete; the ESS "
        "always uses every recorded step)",
    )
    parser.add_argument(
        "--workers",
        type=int_in(1, 64),
        help="processes running samplers (default: min(2, CPUs); 1 with --device cuda)",
    )
    learning = parser.add_argument_group("learning (LSB 1, LSB 2): the registry's options")
    add_option_arguments(learning, (*LEARN_OPTIONS, HIDDEN))
    image = parser.add_argument_group("image problems (with --image)")
    image.add_argument("--lam", type=float_in(0.0, 1e3), help="smoothness lambda >= 0")
    image.add_argument("--mu", type=float_in(-1e3, 1e3), help="data strength mu")
    image.add_argument(
        "--sigma", type=float_in(0.0, 1e3, low_open=True), help="noise scale sigma > 0"
    )
    image.add_argument("--invert", action="store_true", help="the object is dark")
    image.add_argument("--noise", type=float_in(0.0, 1e3), default=None, help="added noise std")
    image.add_argument("--boundary", choices=("free", "periodic"), default=None)
    parser.add_argument(
        "--out",
        type=out_path.output_folder,
        required=True,
        help="output folder: new (in an existing folder) or empty; written whole at the end",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a non-empty --out (it stays as it was until the new results are complete)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")
    return parser


def _validate(parser, args, argv) -> tuple[dict, dict, str]:
    """Check what argparse cannot; returns (problem spec, config, source label)."""
    image_only = {"lam": args.lam, "mu": args.mu, "sigma": args.sigma}
    if args.case is not None:
        given = [f"--{k}" for k, v in image_only.items() if v is not None]
        given += ["--invert"] if args.invert else []
        given += [f"--{k}" for k in ("noise", "boundary") if getattr(args, k) is not None]
        if given:
            parser.error(f"{', '.join(given)} only apply to --image problems")
        args.chains = args.chains or PAPER_CHAINS
        args.size = args.size or PAPER_SIZE
        protocol = resolve_protocol(args.protocol, args.case, args.burn_in)
        if args.lsb2_burnin_steps is not None:
            steps = {"lsb2": args.lsb2_burnin_steps} if args.lsb2_burnin_steps > 1 else {}
            protocol = replace(protocol, burnin_steps=steps)
        args.burn_in = protocol.burn_in  # an explicit --burn-in overrides the protocol's
        args.steps = args.steps or PAPER_STEPS
    else:
        missing = [f"--{k}" for k, v in image_only.items() if v is None]
        if missing:
            parser.error(f"--image needs {', '.join(missing)}")
        if args.protocol != "spec":
            parser.error(
                "--protocol authors is the authors' setting of the paper's cases; "
                "use it with --case"
            )
        if args.lsb2_burnin_steps is not None:
            parser.error("--lsb2-burnin-steps applies to --case problems")
        if "--start" in argv or any(a.startswith("--start=") for a in argv):
            parser.error("--start applies to --case problems (image chains always start apart)")
        if any(a == "--noise-model" or a.startswith("--noise-model=") for a in argv):
            parser.error("--noise-model applies to --case problems (an image's noise is --noise)")
        args.chains = args.chains or IMAGE_CHAINS
        args.size = args.size or IMAGE_SIZE
        source = "protocol" if args.burn_in is None else "--burn-in"
        args.burn_in = IMAGE_BURN_IN if args.burn_in is None else args.burn_in
        args.steps = args.steps or IMAGE_STEPS
        args.noise = 0.0 if args.noise is None else args.noise
        args.boundary = args.boundary or "free"
        protocol = replace(resolve_protocol("spec", None, args.burn_in), burn_in_source=source)
    if args.thin > args.steps:
        parser.error(f"--thin ({args.thin}) must not exceed --steps ({args.steps})")
    most_steps = max(protocol.steps_per_burnin_iteration(n) for n in args.samplers)
    records = (args.burn_in * most_steps + args.steps) // args.thin + 2
    if records * args.chains * len(args.samplers) > MAX_TRACE_VALUES:
        parser.error(
            f"{len(args.samplers)} samplers x {args.chains} chains x {records:,} records is too "
            f"much to keep (limit {MAX_TRACE_VALUES:,} values); use --thin, fewer steps or chains"
        )
    try:
        device = resolve_device(args.device)
        resolve_backend(args.backend, device)
    except ValueError as err:
        parser.error(str(err))
    if args.workers is None:
        args.workers = 1 if device.type == "cuda" else _default_workers()
    args.workers = min(args.workers, len(args.samplers))

    config = {
        "command": shlex.join(["python", "-m", "lsbcore.experiment", *argv]),
        "argv": list(argv),
    }
    if args.case is not None:
        name, lam, mu, sigma, _ = PAPER_CASES[args.case]
        spec = {
            "kind": "case",
            "case": args.case,
            "size": args.size,
            "chains": args.chains,
            "seed": args.seed,
            "start": STARTS[args.start],
            "noise_model": args.noise_model,
        }
        label = f"case {args.case} ({name})"
        config.update(case=args.case, case_name=name, lam=lam, mu=mu, sigma=sigma)
        config.update(boundary="periodic", shape=[args.size, args.size], start=STARTS[args.start])
        config.update(noise_model=args.noise_model)
    else:
        path = args.image
        try:
            found = path.is_file()
        except OSError as err:  # a name too long for the file system, for one
            parser.error(f"--image {out_path.shown(path)}: cannot read it ({err.strerror or err})")
        if not found:
            parser.error(f"--image: no file at {out_path.shown(path)}")
        try:  # the path, not its bytes: load_image refuses a file over its cap before reading
            image = load_image(path, max_side=args.size)
            with open(path, "rb") as f:
                raw = f.read(MAX_IMAGE_BYTES + 1)  # for its hash, capped as the decode was
        except ImageError as err:
            parser.error(f"--image {str(path)!r}: {err}")
        except OSError as err:
            parser.error(f"--image {str(path)!r}: cannot read it ({err.strerror or err})")
        spec = {
            "kind": "image",
            "image": image,
            "lam": args.lam,
            "mu": args.mu,
            "sigma": args.sigma,
            "chains": args.chains,
            "invert": bool(args.invert),
            "noise": args.noise,
            "boundary": args.boundary,
            "seed": args.seed,
        }
        try:
            build_problem(spec)
        except ValueError as err:
            parser.error(f"--image: {err}")
        label = f"image {path.name}"
        config.update(
            image=str(path),
            image_sha256=hashlib.sha256(raw).hexdigest(),
            lam=args.lam,
            mu=args.mu,
            sigma=args.sigma,
            invert=bool(args.invert),
            noise=args.noise,
            boundary=args.boundary,
            shape=list(image.shape),
        )
    config.update(
        samplers=list(args.samplers),
        chains=args.chains,
        size=args.size,
        burn_in=args.burn_in,
        steps=args.steps,
        seed=args.seed,
        device=str(device),
        backend=args.backend,
        thin=args.thin,
        csv_thin=args.csv_thin,
        workers=args.workers,
        learning=_learning(args),
        step_counting=_step_counting(protocol),
        protocol=protocol.name,
        burn_in_source=protocol.burn_in_source,
        ess_from_step=protocol.ess_from_step,
        burnin_steps_per_iteration={
            n: protocol.steps_per_burnin_iteration(n) for n in args.samplers
        },
        seeds=args.seeds,
    )
    args.protocol_resolved = protocol
    sites = math.prod(config["shape"])
    burnin_records = args.burn_in * most_steps // args.thin + 1
    csv_rows = (burnin_records + args.steps // (args.thin * args.csv_thin) + 1) * args.chains
    memory, disk = output.estimate_bytes(
        sites, args.chains, len(args.samplers), records, csv_rows * len(args.samplers), args.workers
    )
    where = next((p for p in (args.out, *args.out.parents) if p.exists()), Path("."))
    problem = output.room_problem(memory, disk, where, output.available_memory())
    if problem:
        parser.error(problem)
    return spec, config, label


def _learning(args) -> dict:
    """The learned samplers' options, as results.json records them."""
    return {
        "lr": args.lr,
        "optimizer": args.optimizer,
        "hidden": args.hidden,
        "restart_prob": args.restart_prob,
        "objective": args.objective,
    }


def _step_counting(protocol) -> str:
    if not protocol.burnin_steps:
        return "one step per chain per sampler per iteration, for every sampler"
    extra = ", ".join(f"{n} {k}" for n, k in sorted(protocol.burnin_steps.items()))
    return (
        "one step per chain per sampler per iteration, except in burn-in (steps per "
        f"iteration): {extra}; the ESS series keeps one record per iteration"
    )


def _print_summary(results: dict, quiet: bool) -> None:
    if quiet:
        return
    from lsbcore.studies.figures import sampler_label

    case = results["config"].get("case")
    paper = PAPER_TABLE2.get(case, {}) if isinstance(case, int) else {}
    config = results["config"]
    lines = [
        f"protocol {config['protocol']}: ESS from step {config['ess_from_step']:,} with "
        f"L = {config['max_lag']}; seeds {config.get('seeds_run', [config['seed']])}"
    ]
    seeds = len(config.get("seeds_run", [config["seed"]]))
    spread = " (± over chains" + (", seed std in [ ])" if seeds > 1 else ")")
    width = 22 if seeds > 1 else 14  # room for the seed std
    shared = config.get("chains_share_posterior", True)
    bulk_key = "ess_bulk" if shared else "ess_bulk_chain_mean"  # pooled only over one posterior
    bulk = "bulk ESS" if shared else "bulk/chain"
    lines.append(
        f"{'sampler':16s} {'paper ESS':>{width}s} {bulk:>10s} {'R-hat':>6s} {'accept':>7s}"
    )
    lines[1] += "  paper Table 2" if paper else ""
    for name, s in results["samplers"].items():
        ess = s["ess_paper_mean"]
        ess = "n/a" if ess is None else f"{ess:.2f} ± {fmt(s['ess_paper_std'], 2)}"
        if seeds > 1:
            ess += f" [{fmt(s['ess_paper_seed_std'], 2)}]"
        line = f"{sampler_label(name):16s} {ess:>{width}s} {fmt(s[bulk_key], 4):>10s} "
        line += f"{fmt(s['rhat'], 3):>6s} {fmt(s['accept_rate'], 3):>7s}"
        if name in paper:
            line += f"  {paper[name][0]:.2f} ± {paper[name][1]:.2f}"
        lines.append(line)
    lines.append(f"paper ESS: mean{spread}")
    t = results["timings"]
    lines.append(
        f"wall time {t['total_seconds']:.1f} s: sampling {t['sampling_wall_seconds']:.1f} s "
        f"({t['workers']} worker(s); summed over samplers: "
        f"burn-in {t['burnin_seconds_sum']:.1f} s, "
        f"mixing {t['mixing_seconds_sum']:.1f} s, recording {t['recording_seconds_sum']:.1f} s), "
        f"traces.csv {t['csv_seconds_sum']:.1f} s in the tasks + {t['csv_concat_seconds']:.1f} s, "
        f"results {t['results_seconds']:.1f} s, report {t['report_seconds']:.1f} s"
    )
    print("\n".join(lines), file=sys.stderr, flush=True)


def _target_of(argv: list[str]) -> str | None:
    """The value of the last ``--target`` in ``argv`` (None when it has none)."""
    value = None
    for i, a in enumerate(argv):
        if a == "--target" and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith("--target="):
            value = a.split("=", 1)[1]
    return value


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--target" or a.startswith("--target=") for a in argv):
        # the RBM, Markov-network and flow experiments have their own arguments and outputs
        target = _target_of(argv)
        if target == "markov-networks":
            from lsbcore.studies.networks.experiment import main as network_experiment

            return network_experiment(argv)
        if target == "flow-denoising":
            from lsbcore.studies.flows.experiment import main as flow_experiment

            return flow_experiment(argv)
        if target is not None and target != "rbm-digits":
            print(
                f"python -m lsbcore.experiment: --target must be rbm-digits or markov-networks, "
                f"got {target[:40]!r}. The flow paper's comparison is --target flow-denoising.",
                file=sys.stderr,
            )
            return 2
        from lsbcore.studies.rbm.experiment import main as rbm_experiment

        return rbm_experiment(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    spec, config, label = _validate(parser, args, argv)
    learning = _learning(args)
    try:
        staging = output.prepare(args.out, args.force)
    except output.OutputError as err:
        parser.error(str(err))
    log_message(
        f"{label}: {', '.join(args.samplers)}; {args.chains} chains, burn-in {args.burn_in:,}, "
        f"{args.steps:,} mixing steps, {args.workers} worker(s), device {config['device']}",
        args.quiet,
    )
    try:
        with interrupt.handled():
            results = _run(spec, args, config, label, learning, staging)
            output.publish(staging, args.out)
    except KeyboardInterrupt as stop:
        output.discard(staging)
        name = "SIGTERM" if isinstance(stop, interrupt.Stopped) else "interrupt"
        log_message(f"{name}: stopped; nothing written, {str(args.out)!r} is as it was", False)
        return INTERRUPTED[1] if isinstance(stop, interrupt.Stopped) else INTERRUPTED[0]
    except OSError as err:
        output.discard(staging)
        log_message(
            f"error: could not write the results ({err.strerror or err}); nothing written, "
            f"{str(args.out)!r} is as it was",
            False,
        )
        return 1
    except BaseException:
        output.discard(staging)
        raise
    _print_summary(results, args.quiet)
    log_message(f"wrote {args.out}/results.json, traces.csv, report.html", args.quiet)
    return 0


def _run(spec, args, config, label, learning, staging: Path) -> dict:
    """The experiment, written into ``staging``."""
    return run_experiment(
        spec,
        args.samplers,
        burn_in=args.burn_in,
        steps=args.steps,
        seed=args.seed,
        device=config["device"],
        backend=args.backend,
        thin=args.thin,
        workers=args.workers,
        out=staging,
        config=config,
        learning=learning,
        quiet=args.quiet,
        source_label=label,
        csv_thin=args.csv_thin,
        protocol=args.protocol_resolved,
        seeds=args.seeds,
    )
