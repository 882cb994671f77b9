"""Bayesian variable selection as a target of the network page: synthetic regression data, the
posterior over which features it uses, and its exact inclusion probabilities on few features.

The target is ``lsbcore.targets.variable_selection``'s marginal posterior of the inclusion vector
(``x_i = +1``: feature ``i`` is in the model) on data from ``synthetic_regression(k, m, seed)``:
``k`` features of which ``m`` are truly informative. It runs on the network page's machinery (a
network-kind target, ``app/network_targets.py``); its view draws P(x_i = +1) per feature.

No Streamlit here.
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.targets.variable_selection import VariableSelection, synthetic_regression

TARGET = "vs"
LABEL = "Variable selection (synthetic)"
DEFAULT_FEATURES = 100  # the paper's smallest setting: a lecture runs it live
DEFAULT_INFORMATIVE = 10
MIN_FEATURES, MAX_FEATURES = 2, 400  # 400: the paper's largest setting
# the study's samplers that move here (gwg's first-order ratios are rejected: it stays put)
DEFAULT_SAMPLERS = ("barker", "sqrt", "lsb1", "gibbs", "metropolis")
DEFAULT_CHAINS = 5
DEFAULT_BURN_IN = 500
DEFAULT_STEPS = 5_000
#: Most features whose 2^k states are enumerated for the exact inclusion probabilities.
MAX_EXACT_FEATURES = 16
_CHUNK = 4096  # states scored per call of log p~ while enumerating


class SyntheticSelection(VariableSelection):
    """Variable selection on synthetic data that knows its truly informative features; its
    features lie in one row (``shape (1, k)``), as the network page's traces and marginals keep
    ``[chains, rows, columns]``."""

    def __init__(self, features: int, informative: int, seed: int):
        data = synthetic_regression(features, informative, seed=seed)
        super().__init__(data.X, data.y)
        self.shape = (1, self.n_sites)
        self.informative = data.informative
        self.seed = seed


def informative_within(features: int, informative: int) -> tuple[int, str | None]:
    """``informative`` clamped to ``[1, features]``, and the sentence saying so when it moved."""
    kept = min(max(int(informative), 1), int(features))
    if kept == informative:
        return kept, None
    return kept, (
        f"Informative features: {informative} is outside [1, {features}] (the features); "
        f"using {kept}."
    )


def describe(target: SyntheticSelection) -> str:
    k, m = target.n_sites, len(target.informative)
    return (
        f"{k:,} features, {m:,} of them informative (data seed {target.seed}), "
        f"{target.n_observations:,} observations; neighbouring features correlate, so the "
        "posterior chooses among close substitutes."
    )


def exact_inclusion(target: VariableSelection) -> np.ndarray:
    """``P(x_i = +1)`` per feature ``[k]`` by enumerating all ``2^k`` inclusion vectors with the
    target's ``log p~``; a ValueError beyond ``MAX_EXACT_FEATURES`` features."""
    k = int(target.n_sites)
    if k > MAX_EXACT_FEATURES:
        raise ValueError(
            f"exact inclusion probabilities enumerate 2^k states: at most {MAX_EXACT_FEATURES} "
            f"features, got {k}."
        )
    bits = torch.arange(k)
    log_p, states = [], []
    for start in range(0, 2**k, _CHUNK):
        codes = torch.arange(start, min(start + _CHUNK, 2**k))
        x = (((codes.unsqueeze(1) >> bits) & 1) * 2 - 1).to(torch.float64)
        log_p.append(target.log_prob(x))
        states.append(x)
    weights = torch.softmax(torch.cat(log_p), 0)
    return ((weights @ ((torch.cat(states) + 1.0) / 2.0)).numpy()).astype(np.float64)


def estimate_from_states(states) -> np.ndarray:
    """``P(x_i = +1)`` per feature ``[k]``: the share of recorded states ``[..., k]`` (any
    chains and steps) that include it."""
    x = np.asarray(states, dtype=np.float64)
    return ((x.reshape(-1, x.shape[-1]) + 1.0) / 2.0).mean(0)


def found(p: np.ndarray, informative) -> tuple[int, int]:
    """(truly informative features with ``p > 1/2``, other features with ``p > 1/2``)."""
    chosen = np.asarray(p) > 0.5
    truth = np.zeros(len(chosen), dtype=bool)
    truth[list(informative)] = True
    return int((chosen & truth).sum()), int((chosen & ~truth).sum())
