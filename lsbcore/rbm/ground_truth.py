"""Ground-truth samples of an RBM and the noise floor of the MMD against them.

The truth is what the public Gibbs-with-Gradients code uses: ``n_samples`` chains of the exact
alternating block Gibbs sampler (``RBM.gibbs``), each run ``steps`` sweeps from a uniform start
(its defaults: 500 samples, 10,000 sweeps). It is cached in memory per model (keyed by a hash of
the weights and the arguments), and for the shipped models it may be read from
``assets/<model>_truth.npz`` (packed bits, written by ``write_truth``) instead of minutes of
Gibbs in the app: ``python -m lsbcore.rbm.ground_truth --model digits-8x8 --out
assets/rbm_digits_8x8_truth.npz`` (likewise ``digits-16x16``).

The noise floor is ``log10 MMD`` between the truth and an independent draw of ``n`` samples by
the same procedure (another seed): what a perfect sampler with ``n`` chains scores.
"""

from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path

import numpy as np
import torch

from lsbcore import interrupt
from lsbcore.checks import integer
from lsbcore.diagnostics.mmd import log_mmd
from lsbcore.out_path import output_file, write_bytes
from lsbcore.targets.rbm import RBM

__all__ = [
    "TRUTH_SAMPLES",
    "TRUTH_STEPS",
    "affordable_steps",
    "floor_draws",
    "ground_truth",
    "is_shipped",
    "model_hash",
    "noise_floor",
    "read_truth",
    "write_truth",
]

TRUTH_SAMPLES, TRUTH_STEPS = 500, 10_000  # the public GWG code's n_samples and gt_steps
# A model with no shipped truth (the user's own) gets the sweeps this many multiply-adds buy
# (two products of n_samples x n x m per sweep; 3-10 GMAC/s on one core here: seconds), never
# fewer than MIN_TRUTH_STEPS (9 s for 4,096 x 200): 10,000 sweeps of that model take 15 minutes
GIBBS_BUDGET = 2 * 10**10
MIN_TRUTH_STEPS = 100
ASSETS = Path(__file__).resolve().parents[2] / "assets"
# The floor's independent draws use seeds far from the truth's, so that no draw repeats it
FLOOR_SEED_OFFSET = 1_000_003
_TRUTH: dict[tuple, torch.Tensor] = {}
_FLOORS: dict[tuple, list[float]] = {}


def model_hash(rbm: RBM) -> str:
    """A hex digest of the RBM's weights and biases (float64 bytes): equal models, equal hash."""
    if not isinstance(rbm, RBM):
        raise ValueError(f"rbm must be an lsbcore RBM, got {type(rbm).__name__}.")
    digest = hashlib.sha256()
    for t in (rbm.W, rbm.b_visible, rbm.b_hidden):
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.detach().to("cpu", torch.float64).contiguous().numpy().tobytes())
    return digest.hexdigest()


def _check(rbm, n_samples, steps, seed) -> tuple[int, int, int]:
    model_hash(rbm)  # validates rbm
    return (
        integer(n_samples, "n_samples", 1, 100_000),
        integer(steps, "steps", 0, 10**9),
        integer(seed, "seed", 0, 2**62),
    )


def ground_truth(
    rbm: RBM, n_samples: int = TRUTH_SAMPLES, steps: int = TRUTH_STEPS, seed: int = 0
) -> torch.Tensor:
    """``[n_samples, n_visible]`` float64 +-1 visibles: ``RBM.gibbs(n_samples, steps, seed)``,
    cached per model and arguments (the same tensor is returned each time: do not modify it)."""
    n_samples, steps, seed = _check(rbm, n_samples, steps, seed)
    key = (model_hash(rbm), n_samples, steps, seed)
    if key not in _TRUTH:
        shipped = _shipped_truth(key)
        _TRUTH[key] = shipped if shipped is not None else rbm.gibbs(n_samples, steps, seed)
    return _TRUTH[key]


def affordable_steps(rbm: RBM, n_samples: int = TRUTH_SAMPLES) -> int:
    """Sweeps of exact block Gibbs for ``n_samples`` truth chains within ``GIBBS_BUDGET``:
    ``TRUTH_STEPS`` for a small model, fewer (at least ``MIN_TRUTH_STEPS``) for a large one."""
    n_samples, _, _ = _check(rbm, n_samples, 0, 0)
    per_sweep = 2 * n_samples * rbm.n_visible * rbm.n_hidden
    return int(min(TRUTH_STEPS, max(MIN_TRUTH_STEPS, GIBBS_BUDGET // per_sweep)))


def is_shipped(rbm: RBM, n_samples: int = TRUTH_SAMPLES, steps: int = TRUTH_STEPS) -> bool:
    """Whether ``assets/`` holds the truth of ``rbm`` (a shipped model: no Gibbs to run)."""
    n_samples, steps, seed = _check(rbm, n_samples, steps, 0)
    return _shipped_truth((model_hash(rbm), n_samples, steps, seed)) is not None


def floor_draws(
    rbm: RBM,
    n: int,
    draws: int = 1,
    n_samples: int = TRUTH_SAMPLES,
    steps: int = TRUTH_STEPS,
    seed: int = 0,
    truth: torch.Tensor | None = None,
) -> list[float]:
    """``log10 MMD`` of ``draws`` independent draws of ``n`` exact samples each against the
    truth (``truth`` if given, else ``ground_truth(rbm, n_samples, steps, seed)``); one Gibbs
    run of ``n * draws`` chains, cached."""
    n = integer(n, "n", 1, 100_000)
    draws = integer(draws, "draws", 1, 1000)
    n_samples, steps, seed = _check(rbm, n_samples, steps, seed)
    if truth is None:
        truth = ground_truth(rbm, n_samples, steps, seed)
    truth_key = hashlib.sha256(truth.to(torch.float64).numpy().tobytes()).hexdigest()
    key = (model_hash(rbm), n, draws, steps, seed, truth_key)
    if key not in _FLOORS:
        if n * draws > 100_000:
            raise ValueError(f"n x draws must be at most 100,000 samples, got {n * draws:,}.")
        exact = rbm.gibbs(n * draws, steps, seed + FLOOR_SEED_OFFSET)
        _FLOORS[key] = [log_mmd(exact[d * n : (d + 1) * n], truth) for d in range(draws)]
    return list(_FLOORS[key])


def noise_floor(rbm: RBM, n: int, draws: int = 1, **truth_args) -> float:
    """The mean ``log10 MMD`` of independent exact draws of ``n`` samples against the truth:
    the level at which a sampler with ``n`` chains has converged (``floor_draws``)."""
    values = floor_draws(rbm, n, draws, **truth_args)
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else -math.inf


# ----------------------------------------------------------------------------- shipped files
def write_truth(rbm: RBM, path, n_samples=TRUTH_SAMPLES, steps=TRUTH_STEPS, seed=0) -> Path:
    """Write ``ground_truth(rbm, ...)`` to ``path`` (``.npz``, packed bits, with the model's
    hash and the arguments, so that a changed model never reads a stale truth)."""
    truth = ground_truth(rbm, n_samples, steps, seed)
    path = Path(path)
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        bits=np.packbits(truth.numpy() > 0, axis=1),
        n_visible=truth.shape[1],
        n_samples=n_samples,
        steps=steps,
        seed=seed,
        model_hash=model_hash(rbm),
    )
    write_bytes(path, buffer.getvalue())  # whole or not at all
    return path


def read_truth(path) -> tuple[tuple, torch.Tensor]:
    """``(key, truth)`` from a file of ``write_truth``; key = (model hash, n_samples, steps,
    seed). A file that is not one raises a one-sentence ValueError."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            n = int(data["n_visible"])
            key = (str(data["model_hash"]), int(data["n_samples"]), int(data["steps"]),
                   int(data["seed"]))  # fmt: skip
            bits = np.unpackbits(data["bits"], axis=1, count=n).astype(bool)
    except (OSError, KeyError, ValueError) as err:
        raise ValueError(
            f"{path} is not a ground-truth file written by write_truth ({err})."
        ) from None
    if bits.shape != (key[1], n):
        raise ValueError(f"{path} holds {bits.shape} bits, not {key[1]} samples of {n} sites.")
    return key, torch.from_numpy(np.where(bits, 1.0, -1.0))


def _shipped_truth(key: tuple) -> torch.Tensor | None:
    """The truth for ``key`` from ``assets/*_truth.npz``, if one of them holds it."""
    for path in sorted(ASSETS.glob("rbm_*_truth.npz")):
        try:
            stored, truth = read_truth(path)
        except ValueError:
            continue
        if stored == key:
            return truth
    return None


def main(argv=None) -> int:
    """``python -m lsbcore.rbm.ground_truth --model digits-8x8 --out assets/...``: write the
    truth file of a model (what ships in ``assets/`` for the shipped models)."""
    import argparse

    from lsbcore.rbm.models import load_model

    parser = argparse.ArgumentParser(prog="python -m lsbcore.rbm.ground_truth")
    parser.add_argument("--model", required=True, help="a shipped model's name or an .npz")
    parser.add_argument("--out", required=True, type=output_file, help="the .npz to write")
    parser.add_argument("--samples", type=int, default=TRUTH_SAMPLES)
    parser.add_argument("--steps", type=int, default=TRUTH_STEPS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        rbm = load_model(args.model)
        write_truth(rbm, args.out, args.samples, args.steps, args.seed)
    except (ValueError, OSError) as err:
        parser.error(str(err))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.rbm.ground_truth"))
