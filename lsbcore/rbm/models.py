"""The shipped digit RBMs by name, and any RBM saved to or read from an ``.npz`` file.

A saved model holds ``W [m, n]``, ``b_visible [n]``, ``b_hidden [m]``, its drawing ``shape``
and a JSON object of free-form facts (``meta``: how it was trained). Files are read with
``allow_pickle=False``: a model file is data, never code.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from lsbcore.out_path import write_bytes
from lsbcore.rbm.data import ASSETS
from lsbcore.targets.rbm import RBM

MODELS: dict[str, str] = {
    "digits-8x8": (
        "handwritten digits 8 x 8: 64 visible and 50 hidden units, trained by PCD on 1,797 "
        "binarised scikit-learn digits"
    ),
    "digits-16x16": (
        "handwritten digits 16 x 16: 256 visible and 100 hidden units, trained by PCD on the "
        "same digits upsampled and binarised"
    ),
    "digits-28x28": (
        "handwritten digits 28 x 28: 784 visible and 250 hidden units (the LSB paper's RBM "
        "size), trained by PCD on the same digits upsampled to MNIST's size and binarised"
    ),
}
MODEL_FILES = {
    "digits-8x8": ASSETS / "rbm_digits_8x8.npz",
    "digits-16x16": ASSETS / "rbm_digits_16x16.npz",
    "digits-28x28": ASSETS / "rbm_digits_28x28.npz",
}
# Largest model file read: 2^26 float64 weights (the RBM target's own cap on its values)
MAX_MODEL_BYTES = 600 * 1000 * 1000
ARRAYS = ("W", "b_visible", "b_hidden", "shape", "meta")


def save_model(rbm: RBM, path, **meta) -> None:
    """Write ``rbm`` (weights, biases, shape) and the JSON-serialisable ``meta`` to ``path`` (an
    ``.npz`` by its content, under the name given), whole or not at all."""
    write_bytes(path, npz_bytes(model_arrays(rbm, meta)))


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """``arrays`` as the bytes of an uncompressed ``.npz``."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def model_arrays(rbm: RBM, meta: dict) -> dict[str, np.ndarray]:
    """The arrays of a model file (``ARRAYS``): ``rbm`` and its ``meta`` as JSON text."""
    if not isinstance(rbm, RBM):
        raise ValueError(f"save_model needs an RBM, got {type(rbm).__name__}.")
    try:
        text = json.dumps(meta, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError(
            "the model's meta must hold JSON values only (numbers, strings, lists, dicts)."
        ) from None
    return {
        "W": rbm.W.numpy(),
        "b_visible": rbm.b_visible.numpy(),
        "b_hidden": rbm.b_hidden.numpy(),
        "shape": np.asarray(rbm.shape, dtype=np.int64),
        "meta": np.asarray(text),
    }


def _read(name_or_path) -> tuple[dict[str, np.ndarray], str]:
    """The arrays of a model file (by shipped name, path or bytes) and how to name it."""
    if isinstance(name_or_path, str) and name_or_path in MODELS:
        source, label = MODEL_FILES[name_or_path], f"the shipped model {name_or_path}"
    elif isinstance(name_or_path, (bytes, bytearray, memoryview)):
        if len(name_or_path) > MAX_MODEL_BYTES:
            raise ValueError(
                f"the model file is larger than {MAX_MODEL_BYTES // 10**6} MB, the largest read."
            )
        source, label = io.BytesIO(bytes(name_or_path)), "the model file"
    elif isinstance(name_or_path, (str, os.PathLike)):
        source, label = Path(name_or_path), f"the model file {os.fspath(name_or_path)}"
        if not source.is_file():
            names = ", ".join(MODELS)
            raise ValueError(f"{label} does not exist (shipped models: {names}).")
        if source.stat().st_size > MAX_MODEL_BYTES:
            raise ValueError(
                f"{label} is larger than {MAX_MODEL_BYTES // 10**6} MB, the largest read."
            )
    else:
        raise ValueError(
            f"a model is named by a shipped name ({', '.join(MODELS)}), a path or the bytes of "
            f"an .npz file, got {type(name_or_path).__name__}."
        )
    try:
        with np.load(source, allow_pickle=False) as stored:
            missing = [key for key in ARRAYS if key not in stored.files]
            if missing:
                raise ValueError(
                    f"{label} is not a saved RBM: it lacks {', '.join(missing)} "
                    "(write models with save_model)."
                )
            return {key: stored[key] for key in ARRAYS}, label
    except ValueError as error:
        if "is not a saved RBM" in str(error):
            raise
        raise ValueError(f"{label} is not a readable .npz of an RBM ({error}).") from None
    except (OSError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{label} is not a readable .npz of an RBM ({error}).") from None


def read_meta(name_or_path) -> dict:
    """The facts saved with a model (``save_model``'s ``meta``)."""
    arrays, label = _read(name_or_path)
    return _meta(arrays["meta"], label)


def _meta(stored: np.ndarray, label: str) -> dict:
    try:
        meta = json.loads(str(stored.item()))
    except (ValueError, TypeError):
        meta = None
    if not isinstance(meta, dict):
        raise ValueError(f"{label} has a damaged meta record (not a JSON object).")
    return meta


def load_model(name_or_path) -> RBM:
    """A shipped model by name (``MODELS``), or an ``.npz`` written by :func:`save_model` (a
    path or its bytes), as an :class:`RBM` with its saved drawing ``shape``."""
    arrays, label = _read(name_or_path)
    for key in ("W", "b_visible", "b_hidden"):
        if arrays[key].dtype.kind not in "fiu":
            raise ValueError(f"{label} holds {key} of type {arrays[key].dtype}, not numbers.")
    shape = arrays["shape"]
    if shape.dtype.kind not in "iu" or shape.ndim != 1 or not 1 <= shape.size <= 3:
        raise ValueError(f"{label} has a damaged shape record (1 to 3 positive integers).")
    _meta(arrays["meta"], label)
    try:
        return RBM(
            arrays["W"], arrays["b_visible"], arrays["b_hidden"], shape=tuple(int(s) for s in shape)
        )
    except ValueError as error:
        raise ValueError(f"{label} does not hold a valid RBM: {error}") from None


__all__ = ["MODELS", "MODEL_FILES", "MAX_MODEL_BYTES", "save_model", "load_model", "read_meta"]
