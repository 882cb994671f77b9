"""Train a Bernoulli RBM on binary data by persistent contrastive divergence (PCD).

The log-likelihood gradient is ``E_data[v h^T] - E_model[v h^T]`` (and the same for the
biases). PCD (Tieleman, 2008) takes the first term from a minibatch, with ``h`` summed out
(``p(h = 1 | v) = sigmoid(c + W v)``), and the second from ``n_persistent`` chains that are
never restarted: each update advances them ``k`` steps of exact block Gibbs on ``(v, h)``, so
they track the slowly changing model instead of starting again from the data (CD's bias).
The learning rate falls linearly to zero over the epochs, which lets the chains catch up with
the final weights. Everything is seeded by one ``torch.Generator``: same seed, same model.

    python -m lsbcore.rbm.train --data digits-8x8 --hidden 50 --epochs 300 --out model.npz

Ctrl-C (or SIGTERM) stops the command at the end of the current epoch: it writes the model so
far to ``--out`` with the whole training state (weights, momentum, persistent chains, the
generator's state), and the same command with ``--resume`` continues from there to the model
an uninterrupted run gives, bit for bit. A second Ctrl-C stops at once, writing nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lsbcore import interrupt
from lsbcore.checks import integer, real
from lsbcore.out_path import output_file, write_bytes
from lsbcore.rbm.data import MAX_FILE_BYTES, MAX_ROWS, MAX_VISIBLE, default_layout
from lsbcore.rbm.likelihood import (
    MAX_EXACT_UNITS,
    as_visible,
    exact_log_likelihood,
    pseudo_log_likelihood,
)
from lsbcore.rbm.models import MAX_MODEL_BYTES, model_arrays, npz_bytes
from lsbcore.targets.base import MAX_LOCAL_FIELD, check_layout
from lsbcore.targets.rbm import RBM

MAX_HIDDEN = 2_000
MAX_EPOCHS = 100_000
# The longest training the library accepts (the app passes its own, smaller cap)
MAX_TRAINING_SECONDS = 3_600.0
# The per-epoch figures: the pseudo-log-likelihood on at most this many fixed rows, and the
# exact log-likelihood when the smaller layer has at most this many units (2^12 states)
MONITOR_ROWS = 500
MONITOR_EXACT_UNITS = 12
INITIAL_WEIGHT_STD = 0.01
MOMENTUM = 0.5
# the tensors of the training state that a resumed run continues from (``Training.resume``)
STATE = ("W", "b", "c", "velocity_W", "velocity_b", "velocity_c", "chains", "monitor")

Progress = Callable[[float, str], "bool | None"]


@dataclass
class Training:
    """What ``train`` returns: the model, one record per epoch finished
    (``epoch``, ``seconds``, ``pseudo_log_likelihood``, ``log_likelihood`` (exact; None when
    the model is too large to enumerate)) and why training stopped early (None: it did not)."""

    model: RBM
    history: list[dict] = field(default_factory=list)
    stopped: str | None = None
    #: after a ``stop`` between epochs: what ``train(..., resume=)`` continues from
    resume: dict | None = None


def _settings(rows: torch.Tensor, **settings) -> str:
    """What a resumed run must share with the run it continues, as JSON: the arguments that
    decide the numbers and a hash of the data."""
    digest = hashlib.sha256(rows.numpy().tobytes()).hexdigest()[:16]
    return json.dumps({**settings, "rows": list(rows.shape), "data_sha256": digest}, sort_keys=True)


def _state(tensors: dict, generator: torch.Generator, epoch: int, history, settings: str) -> dict:
    """The training state after ``epoch`` whole epochs, as arrays (an ``.npz`` holds them)."""
    state = {name: tensor.numpy().copy() for name, tensor in tensors.items()}
    state.update(
        generator=generator.get_state().numpy(),
        epoch=np.asarray(epoch),
        history=np.asarray(json.dumps(history)),
        settings=np.asarray(settings),
    )
    return state


def _check_data(data) -> torch.Tensor:
    size = data.numel() if isinstance(data, torch.Tensor) else np.size(data)
    if size > MAX_ROWS * MAX_VISIBLE:
        raise ValueError(
            f"data holds {size:,} values; at most {MAX_ROWS * MAX_VISIBLE:,} are used."
        )
    rows = as_visible(data)
    n_rows, n = rows.shape
    if n_rows > MAX_ROWS:
        raise ValueError(f"data has {n_rows:,} rows; at most {MAX_ROWS:,} can be trained on.")
    if n > MAX_VISIBLE:
        raise ValueError(f"data rows have {n:,} values; at most {MAX_VISIBLE:,} visible units.")
    return rows


def train(
    data,
    n_hidden: int,
    *,
    epochs: int = 100,
    batch_size: int = 100,
    lr: float = 0.05,
    k: int = 1,
    n_persistent: int | None = None,
    weight_decay: float = 1e-4,
    seed: int = 0,
    max_seconds: float | None = None,
    progress: Progress | None = None,
    shape=None,
    stop: Callable[[], bool] | None = None,
    resume: dict | None = None,
) -> Training:
    """An RBM with ``n_hidden`` hidden units fitted to the rows of ``data`` (``[N, n]`` of 0/1,
    or +-1) by PCD: ``epochs`` passes over the shuffled rows in minibatches of ``batch_size``,
    learning rate ``lr`` (falling linearly to 0) with momentum 0.5 and L2 ``weight_decay`` on
    ``W``, ``k`` block Gibbs steps per update on ``n_persistent`` chains (default: the batch
    size). ``progress(done_fraction, message)`` is called after every update; returning False
    stops training (``Training.stopped`` says so), as does ``max_seconds``. ``shape`` lays the
    visible units out for drawing (default: ``data.default_layout``, the most square grid).
    ``stop()`` is asked at the end of every epoch; when it says True training stops there and
    ``Training.resume`` holds the state that ``resume=`` continues from, with the same data and
    arguments, to the same model as a run never stopped."""
    visible = _check_data(data)
    n_rows, n = visible.shape
    n_hidden = integer(n_hidden, "n_hidden", 1, MAX_HIDDEN)
    epochs = integer(epochs, "epochs", 1, MAX_EPOCHS)
    batch_size = integer(batch_size, "batch_size", 1, MAX_ROWS)
    lr = real(lr, "lr", 0.0, 10.0)
    if lr == 0.0:
        raise ValueError("lr must be a positive real number up to 10, got 0.")
    k = integer(k, "k", 1, 1_000)
    n_persistent = integer(
        batch_size if n_persistent is None else n_persistent, "n_persistent", 1, MAX_ROWS
    )
    weight_decay = real(weight_decay, "weight_decay", 0.0, 1.0)
    seed = integer(seed, "seed", 0, 2**63 - 1)
    if max_seconds is not None:
        max_seconds = real(max_seconds, "max_seconds", 0.0, MAX_TRAINING_SECONDS)
    if progress is not None and not callable(progress):
        raise ValueError("progress must be a function (done_fraction, message) or None.")
    shape = check_layout(default_layout(n) if shape is None else shape, n, "visible units")

    settings = _settings(
        visible, n_hidden=n_hidden, epochs=epochs, batch_size=batch_size, lr=lr, k=k,
        n_persistent=n_persistent, weight_decay=weight_decay, seed=seed,
    )  # fmt: skip
    generator = torch.Generator().manual_seed(seed)
    result = Training(model=None)
    if resume is None:
        W = torch.randn(n_hidden, n, generator=generator, dtype=torch.float64)
        W *= INITIAL_WEIGHT_STD
        mean = visible.mean(0).clamp(1e-3, 1 - 1e-3)
        b = torch.log(mean / (1 - mean))  # the factorised model's biases: a good start
        c = torch.zeros(n_hidden, dtype=torch.float64)
        velocity = [torch.zeros_like(t) for t in (W, b, c)]
        # persistent chains start from the factorised model
        chains = torch.bernoulli(mean.expand(n_persistent, n).contiguous(), generator=generator)
        monitor = visible[torch.randperm(n_rows, generator=generator)[:MONITOR_ROWS]]
        first = 0
    else:
        if str(resume.get("settings")) != settings:
            raise ValueError(
                "the saved training was run on other data or with other arguments; resume it "
                "with the same ones"
            )
        W, b, c, *velocity, chains, monitor = (
            torch.from_numpy(np.array(resume[name], dtype=np.float64)) for name in STATE
        )
        generator.set_state(torch.from_numpy(np.array(resume["generator"], dtype=np.uint8)))
        first = int(resume["epoch"])
        result.history = json.loads(str(resume["history"]))

    batches = math.ceil(n_rows / batch_size)
    total = epochs * batches
    result.model = RBM(W, b, c, shape=shape)
    # the seconds of a resumed run count on from those of the run it continues
    started = time.perf_counter() - (result.history[-1]["seconds"] if result.history else 0.0)
    done = first * batches
    for epoch in range(first + 1, epochs + 1):
        order = torch.randperm(n_rows, generator=generator)
        for first in range(0, n_rows, batch_size):
            batch = visible[order[first : first + batch_size]]
            rate = lr * (1.0 - done / total)
            # positive phase: p(h | v) of the data; negative phase: k steps of the chains
            positive = torch.sigmoid(torch.addmm(c, batch, W.T))
            for _ in range(k):
                hidden = torch.bernoulli(
                    torch.sigmoid(torch.addmm(c, chains, W.T)), generator=generator
                )
                chains = torch.bernoulli(
                    torch.sigmoid(torch.addmm(b, hidden, W)), generator=generator
                )
            negative = torch.sigmoid(torch.addmm(c, chains, W.T))
            gradients = (
                positive.T @ batch / len(batch)
                - negative.T @ chains / n_persistent
                - weight_decay * W,
                batch.mean(0) - chains.mean(0),
                positive.mean(0) - negative.mean(0),
            )
            for parameter, speed, gradient in zip((W, b, c), velocity, gradients, strict=True):
                speed.mul_(MOMENTUM).add_(gradient, alpha=rate)
                parameter.add_(speed)
            done += 1
            elapsed = time.perf_counter() - started
            if progress is not None and progress(done / total, f"epoch {epoch}/{epochs}") is False:
                result.stopped = f"stopped by the user after {done:,} of {total:,} updates"
            elif max_seconds is not None and elapsed >= max_seconds:
                result.stopped = (
                    f"stopped at the time limit of {max_seconds:g} s after {done:,} of "
                    f"{total:,} updates"
                )
            if result.stopped:
                break
        if not all(bool((t.abs() <= MAX_LOCAL_FIELD).all()) for t in (W, b, c)):  # NaN too
            raise ValueError(
                f"training diverged in epoch {epoch} (weights grew beyond "
                f"{MAX_LOCAL_FIELD:g} or became NaN); use a smaller lr."
            )
        model = RBM(W, b, c, shape=shape)
        result.model = model
        if done % batches == 0:  # a whole epoch: record it
            exact = (
                exact_log_likelihood(model, monitor)
                if min(n, n_hidden) <= min(MONITOR_EXACT_UNITS, MAX_EXACT_UNITS)
                else None
            )
            result.history.append(
                {
                    "epoch": epoch,
                    "seconds": time.perf_counter() - started,
                    "pseudo_log_likelihood": pseudo_log_likelihood(model, monitor),
                    "log_likelihood": exact,
                }
            )
        if result.stopped:
            break
        if stop is not None and epoch < epochs and stop():
            result.stopped = f"interrupted after epoch {epoch} of {epochs}"
            tensors = dict(zip(STATE, (W, b, c, *velocity, chains, monitor), strict=True))
            result.resume = _state(tensors, generator, epoch, result.history, settings)
            break
    return result


def progress_bar(label: str = "training", width: int = 30, stream=None) -> Progress:
    """A text progress bar on stderr (redrawn in place), as a ``progress`` callback."""
    stream = sys.stderr if stream is None else stream
    started = time.perf_counter()
    last = [-1]

    def show(fraction: float, message: str) -> None:
        filled = int(width * fraction)
        if filled == last[0] and fraction < 1.0:
            return
        last[0] = filled
        elapsed = time.perf_counter() - started
        bar = "#" * filled + "-" * (width - filled)
        stream.write(f"\r{label} [{bar}] {100 * fraction:5.1f}% {message} {elapsed:5.1f} s")
        if fraction >= 1.0:
            stream.write("\n")
        stream.flush()

    return show


RESUME_PREFIX = "resume_"  # the training state's arrays in a model file, beside the model's


def save_training(result: Training, path, **meta) -> None:
    """``result.model`` and ``meta`` as a model file (``save_model``), with the training state
    when training was interrupted (``result.resume``), whole or not at all."""
    arrays = model_arrays(result.model, {**meta, "stopped": result.stopped})
    for name, value in (result.resume or {}).items():
        arrays[RESUME_PREFIX + name] = value
    write_bytes(path, npz_bytes(arrays))


def read_resume(path) -> dict:
    """The training state saved by an interrupted run in ``path`` (a ``ValueError`` sentence
    when it holds none)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--resume: there is no file {str(path)!r} to resume")
    if path.stat().st_size > MAX_MODEL_BYTES:
        raise ValueError(f"--resume: {str(path)!r} is larger than a model file can be")
    try:
        with np.load(path, allow_pickle=False) as stored:
            state = {
                name[len(RESUME_PREFIX) :]: stored[name]
                for name in stored.files
                if name.startswith(RESUME_PREFIX)
            }
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
        raise ValueError(f"--resume: {str(path)!r} is not a readable model file ({err})") from None
    if not state:
        raise ValueError(
            f"--resume: {str(path)!r} holds no interrupted training (a finished model, or "
            "another file)"
        )
    return state


def main(argv: list[str] | None = None) -> int:
    from lsbcore.rbm.data import digits, load_binary_data

    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.rbm.train",
        description="Train an RBM on binary data by persistent contrastive divergence. Ctrl-C "
        "stops at the end of the current epoch and saves the training in --out; --resume "
        "continues it.",
    )
    parser.add_argument(
        "--data",
        required=True,
        help="digits-8x8, digits-16x16, digits-28x28, or a .npy / .zip file",
    )
    parser.add_argument("--hidden", type=int, default=50, help="hidden units (default 50)")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--k", type=int, default=1, help="Gibbs steps per update")
    parser.add_argument(
        "--persistent", type=int, default=None, help="persistent chains (default: the batch size)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=None)
    parser.add_argument("--out", required=True, type=output_file, help="the .npz to write")
    parser.add_argument(
        "--resume", action="store_true",
        help="continue the interrupted training saved in --out (same data and arguments)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    # the matrices are small: one thread is as fast, far faster on a busy machine, and gives
    # the shipped models bit for bit (assets/make_digits.py trains on one thread too)
    torch.set_num_threads(1)
    settings = dict(
        epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, k=args.k,
        n_persistent=args.persistent, seed=args.seed,
    )  # fmt: skip
    stop = interrupt.StopRequest()
    try:
        resume = read_resume(args.out) if args.resume else None
        if args.data in ("digits-8x8", "digits-16x16", "digits-28x28"):
            size = int(args.data.split("x")[-1])
            rows, shape = digits(size)[0], (size, size)
        else:
            with open(args.data, "rb") as handle:  # one byte past the cap: refused, not read
                rows, shape = load_binary_data(handle.read(MAX_FILE_BYTES + 1), args.data)
        # the first Ctrl-C (or SIGTERM) asks for a stop at the epoch's end, a second stops now
        with interrupt.handled(stop, patient=True):
            result = train(
                rows, args.hidden, max_seconds=args.max_seconds, progress=progress_bar(),
                shape=shape, stop=stop.is_set, resume=resume, **settings,
            )  # fmt: skip
            if result.stopped and result.resume is None:  # else the sentence below says it
                print(f"\n{result.stopped}", file=sys.stderr)
            save_training(result, args.out, data=args.data, hidden=args.hidden, **settings)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if result.resume is not None:
        given = sys.argv[1:] if argv is None else list(argv)
        again = shlex.join(["python", "-m", "lsbcore.rbm.train", *given])
        again += "" if args.resume else " --resume"
        print(
            f"stopped by {interrupt.said(stop.signum)} after epoch {int(result.resume['epoch'])}"
            f" of {args.epochs}; the training so far is saved in {args.out}, and {again} "
            "continues it.",
            file=sys.stderr,
        )
        return interrupt.exit_status(stop.signum)
    if result.history:
        last = result.history[-1]
        print(
            f"epoch {last['epoch']}: pseudo-log-likelihood {last['pseudo_log_likelihood']:.3f} "
            f"per row, {last['seconds']:.1f} s; wrote {args.out}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.rbm.train"))
