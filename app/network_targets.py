"""The Markov-network targets the dashboard offers, their defaults, and the .uai upload reader.

The target picker's network entries: MN 1 and MN 2 (``lsbcore.networks.presets``: the paper's
Table 3 networks as the product generates them, 10 x 10 grids with near-deterministic tables of
probability ``epsilon`` off the favoured value; ``epsilon = 0`` makes them exact zeros), and a
network the user uploads as a UAI ``MARKOV`` or ``BAYES`` file; and Bayesian variable selection
on synthetic data (``app/selection_target.py``), which runs on the same page. Every name the app
takes from ``lsbcore.networks`` and ``lsbcore.targets.factor_graph`` goes through here.

What the three kinds of target are (the app branches on their kind, ``app/target_kind.py``):
"ising" (the segmentation posterior), "rbm" (app/rbm_targets.py) and "network" (this module).

No Streamlit here.
"""

from __future__ import annotations

import math

import torch

from app import selection_target
from lsbcore import REGISTRY

TARGETS = ("mn1", "mn2", "uai", selection_target.TARGET)
PRESETS = ("mn1", "mn2")
TARGET_LABELS = {
    "mn1": "Markov network: MN 1",
    "mn2": "Markov network: MN 2",
    "uai": "Markov network: your .uai",
    selection_target.TARGET: selection_target.LABEL,
}
# The paper's Table 3 comparison: its four fixed functions, LSB 1, LSB 2 and LSB 2' (the
# monotone network, arXiv version) where the library has it
TABLE3_SAMPLERS = ("barker", "sqrt", "min", "max", "lsb1", "lsb2", "lsb2-monotone")
# Every registry sampler but the imported one (which needs a file from another run) and the
# flow samplers (their flow is trained in the background on the Ising page only: here the
# sampler would train it while the page waits); the ones a given network refuses (gradient
# samplers on exact zeros) are dropped by ``runnable``
SAMPLERS = tuple(
    name for name, spec in REGISTRY.items() if not spec.needs_balancing and not spec.takes_flow
)
DEFAULT_SAMPLERS = tuple(n for n in TABLE3_SAMPLERS if n in REGISTRY)
DEFAULT_CHAINS = 5  # the paper's batch of 5 (appendix D)
DEFAULT_BURN_IN = 500  # the paper's UAI burn-in: the learned functions learn during it
DEFAULT_STEPS = 10_000  # the paper's sampling iterations
DEFAULT_EPSILON = 1e-3  # the presets' near-deterministic entries (0: hard zeros)

#: Most variables of an uploaded network the app samples and draws.
MAX_VARIABLES = 2_000
# the start search on a visitor's upload: what the page waits before saying no state has mass
UPLOAD_START_SECONDS = 1.0


def is_network(target: str) -> bool:
    return target in TARGETS


def runnable(graph) -> tuple[tuple[str, ...], dict[str, list[str]]]:
    """The offered samplers that run on ``graph``, and the labels of those it refuses grouped
    by what they need: "gradient" (a differentiable log p~, which exact zeros rule out) or
    "pairwise" (a pairwise model: the checkerboard's colouring)."""
    from lsbcore.samplers.registry import samplers_for

    ok = set(samplers_for(graph))
    refused: dict[str, list[str]] = {}
    for n in SAMPLERS:
        if n not in ok:
            need = "gradient" if "gradient" in REGISTRY[n].needs else "pairwise"
            refused.setdefault(need, []).append(REGISTRY[n].label)
    return tuple(n for n in SAMPLERS if n in ok), refused


def preset(target: str, epsilon: float):
    """The preset network ``target`` (``mn1`` or ``mn2``) at ``epsilon``."""
    if target not in PRESETS:
        raise ValueError(f"{target!r} is not a preset network; choose one of {', '.join(PRESETS)}.")
    from lsbcore.networks.presets import preset as build

    return build(target, epsilon=epsilon)


def preset_description(target: str, epsilon: float) -> str:
    from lsbcore.networks.presets import PRESETS as NETWORKS

    p = NETWORKS[target]
    zero = "exact zeros" if epsilon == 0 else f"probability {epsilon:g}"
    return (
        f"{p.label}: a {p.side} × {p.side} grid network generated like the paper's Table 3 "
        f"networks (seed {p.seed}), {p.determinism:.0%} of its tables near-deterministic: "
        f"{zero} off the favoured value."
    )


def zero_entries(graph) -> tuple[int, int]:
    """(table entries of zero probability, all table entries) of ``graph``."""
    zeros = sum(int(torch.isneginf(t).sum()) for t in graph.log_tables)
    return zeros, sum(int(t.numel()) for t in graph.log_tables)


def read_upload(data: bytes, name: str):
    """The ``FactorGraph`` of an uploaded UAI file (``name``: its file name) and the line saying
    what was read; a ValueError (one sentence naming the upload) for a file the library's upload
    reader refuses (over its 4 MB cap, not a UAI model, a variable with three values, a table
    cut short, ...), a model of more than ``MAX_VARIABLES`` variables, or one with no state of
    positive probability."""
    from lsbcore.targets.factor_graph import FactorGraph
    from lsbcore.targets.uai import read_uai_upload

    label = f"the upload {name[:80]!r}"  # as the library's reader names it
    try:
        model = read_uai_upload(data, name)
    except ValueError as err:
        # the reader's own sentences name the upload; those about a line of the file do not
        message = str(err)
        raise ValueError(message if message.startswith(label) else f"{label}, {message}") from err
    if model.n_variables > MAX_VARIABLES:
        raise ValueError(
            f"{label} declares {model.n_variables:,} variables; the dashboard samples and draws "
            f"networks of at most {MAX_VARIABLES:,}."
        )
    # one row of variables: the traces and marginals keep [chains, rows, columns]
    graph = FactorGraph(
        model.n_variables, model.scopes, model.log_tables, shape=(1, model.n_variables)
    )
    try:
        # a sentence when no state has mass, within what the page can wait
        graph.start(1, torch.Generator().manual_seed(0), seconds=UPLOAD_START_SECONDS)
    except ValueError as err:
        raise ValueError(f"{label}: {err}") from err
    return graph, f"Read {name[:80]!r}: {model.describe()}."


def max_abs_log_ratio(graph) -> float:
    """A bound on ``|log t|`` of a single flip with finite ratio: for each variable the sum,
    over the factors it is in, of the spread of the factor's finite log-table entries."""
    spread = [0.0] * graph.n_variables
    for scope, table in zip(graph.scopes, graph.log_tables, strict=True):
        finite = table[torch.isfinite(table)]
        width = float(finite.max() - finite.min()) if finite.numel() else 0.0
        for v in scope:
            spread[v] += width
    top = max(spread, default=0.0)
    return top if math.isfinite(top) else 0.0
