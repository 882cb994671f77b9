"""A regression's data as the targets built on it take them (``VariableSelection``,
``QuantisedLogistic``): the design matrix ``X [d, f]`` and one response or label per row."""

from __future__ import annotations

import torch

from lsbcore.targets.base import as_real_tensor

#: Features a design matrix may have (the targets' sites grow with them).
MAX_FEATURES = 4096


def design(X, y, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``X`` and ``y`` as float64 tensors, checked: ``X`` 2-D with at least one row and one and at
    most ``MAX_FEATURES`` features, ``y`` one ``what`` (a response, a label) per row, both
    finite. Each refusal is one sentence naming the argument."""
    X = as_real_tensor(X, "X")
    y = as_real_tensor(y, "y")
    if X.dim() != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(
            f"X must be a 2-D array [observations, features] with both sizes at least 1, got "
            f"shape {tuple(X.shape)}."
        )
    d, f = X.shape
    if f > MAX_FEATURES:
        raise ValueError(f"X has {f:,} features; at most {MAX_FEATURES:,} are supported.")
    if y.dim() != 1 or y.shape[0] != d:
        raise ValueError(
            f"y must be a 1-D array with one {what} per row of X ({d}), got shape {tuple(y.shape)}."
        )
    for name, value in (("X", X), ("y", y)):
        if not bool(torch.isfinite(value).all()):
            raise ValueError(f"{name} must hold finite numbers only (no NaN or infinity).")
    return X, y
