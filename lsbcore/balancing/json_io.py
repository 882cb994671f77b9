"""Learned balancing functions as JSON: plain numbers, a version field, no pickle.

Learn on one image, reuse on another: ``save_balancing(sampler.balancing, path)`` and later
``make_sampler("learned", target, ..., balancing=load_balancing(path))``. Loading validates
every field and refuses malformed or oversized input with a sentence saying what is wrong.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from lsbcore import bounded_json
from lsbcore.balancing.functions import (
    DENSE_LIMIT,
    Balancing,
    MixtureBalancing,
    NetworkBalancing,
)
from lsbcore.balancing.monotone import MAX_GROUPS, MAX_UNITS, MonotoneBalancing
from lsbcore.numerics import MAX_LOCAL_FIELD

FORMAT = "lsb-explorer/balancing"
VERSION = 1
# a 256-unit LSB 2 needs ~20 kB, a 32 x 32 LSB 2' ~50 kB; anything far larger is not ours
MAX_BYTES = 256 * 1024
MAX_HIDDEN = 256
# Parameters beyond these are not learned ones and could overflow on the lattice: with
# |w| <= 1e4, 256 hidden units and |s| <= PROBE_RANGE (2e6) the network's output stays below
# 256 * 1e4 * (1e4 * 2e6 + 1e4) + 1e4 ~ 5e16, far from float64's 1e308
MAX_PARAMETER = 1e4
# log t = s where the functions are checked: every log-ratio a target may produce, since
# targets keep |h_i| + sum_j |J_ij| <= MAX_LOCAL_FIELD and s_i = -2 x_i f_i
PROBE_RANGE = 2 * MAX_LOCAL_FIELD


def balancing_to_dict(balancing: Balancing, meta: dict | None = None) -> dict:
    """A JSON-ready description of a learned balancing function (LSB 1, LSB 2 or LSB 2')."""
    if isinstance(balancing, MixtureBalancing):
        params = {"theta": balancing.theta.detach().cpu().tolist()}
        kind = "lsb1"
    elif isinstance(balancing, NetworkBalancing):
        params = {
            "hidden": balancing.hidden,
            "w1": balancing.layer1.weight.detach().cpu().view(-1).tolist(),
            "b1": balancing.layer1.bias.detach().cpu().tolist(),
            "w2": balancing.layer2.weight.detach().cpu().view(-1).tolist(),
            "b2": float(balancing.layer2.bias.detach().cpu()[0]),
        }
        kind = "lsb2"
    elif isinstance(balancing, MonotoneBalancing):
        params = {
            "groups": balancing.groups,
            "units": balancing.units,
            "slope": balancing.slope.detach().cpu().reshape(-1).tolist(),
            "intercept": balancing.intercept.detach().cpu().reshape(-1).tolist(),
        }
        kind = "lsb2-monotone"
    else:
        raise ValueError(
            "only learned balancing functions (LSB 1, LSB 2, LSB 2') can be exported, "
            f"got {balancing.name!r}."
        )
    out = {"format": FORMAT, "version": VERSION, "kind": kind, "parameters": params}
    if meta:
        out["meta"] = json.loads(json.dumps(meta, allow_nan=False, default=str))
    return out


def balancing_to_json(balancing: Balancing, meta: dict | None = None) -> str:
    return json.dumps(balancing_to_dict(balancing, meta), indent=2, allow_nan=False)


def save_balancing(balancing: Balancing, path, meta: dict | None = None) -> None:
    Path(path).write_text(balancing_to_json(balancing, meta), encoding="utf-8")


def _numbers(value, name: str, length: int) -> list[float]:
    if not isinstance(value, list) or len(value) != length:
        raise ValueError(f"'{name}' must be a list of {length} numbers.")
    out = []
    for v in value:
        number = not isinstance(v, bool) and isinstance(v, (int, float))
        if not (number and abs(v) <= MAX_PARAMETER):  # False for NaN, no float() of a huge int
            raise ValueError(
                f"'{name}' must contain only finite numbers between ±{MAX_PARAMETER:,.0f}."
            )
        out.append(float(v))
    return out


def _short(value, limit: int = 40) -> str:
    """A value from the file inside a message: its repr, shortened (it may be huge)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _read(source) -> dict:
    if isinstance(source, dict):
        return source
    if isinstance(source, (bytes, bytearray)):
        raw = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        text = str(source)
        looks_like_json = text.lstrip()[:1] in ("{", "[") or len(text) > 4096
        if isinstance(source, str) and looks_like_json:
            raw = text.encode("utf-8")
        else:
            path = Path(source)
            try:
                is_file = path.is_file()
            except (OSError, ValueError):
                is_file = False
            if not is_file:
                raise ValueError(f"no learned-function file at {text[:200]!r}.")
            if path.stat().st_size > MAX_BYTES:
                raise ValueError(
                    f"the file is larger than {MAX_BYTES // 1024} kB; not a learned function."
                )
            raw = path.read_bytes()
    elif hasattr(source, "read"):
        raw = source.read(MAX_BYTES + 1)
        raw = raw.encode("utf-8") if isinstance(raw, str) else raw
    else:
        raise ValueError(
            f"expected a path, JSON text, bytes or a dict, got {type(source).__name__}."
        )
    if len(raw) > MAX_BYTES:
        raise ValueError(f"the JSON is larger than {MAX_BYTES // 1024} kB; not a learned function.")
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark, as some editors write, is skipped
    except UnicodeDecodeError as err:
        raise ValueError("this is not UTF-8 text, so not a learned-function JSON.") from err
    try:
        data = bounded_json.loads(text, "a learned function")
    except json.JSONDecodeError as err:
        raise ValueError(f"this is not valid JSON ({err.__class__.__name__}).") from err
    if not isinstance(data, dict):
        raise ValueError(
            "the JSON must be an object with 'format', 'version', 'kind', 'parameters'."
        )
    return data


def _monotone(params: dict) -> MonotoneBalancing:
    """LSB 2' from its parameters: the network's shape, then ``K * J`` slopes in ``[0, 1]``
    (what makes ``g`` monotone: refused otherwise, never clipped silently) and intercepts."""
    shape = []
    for name, cap in (("groups", MAX_GROUPS), ("units", MAX_UNITS)):
        value = params.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
            raise ValueError(f"'{name}' must be an integer between 1 and {cap}.")
        shape.append(value)
    size = shape[0] * shape[1]
    slope = _numbers(params.get("slope"), "slope", size)
    if not all(0.0 <= w <= 1.0 for w in slope):
        raise ValueError(
            "'slope' must lie in [0, 1]: the monotone network's slopes in log t, which make "
            "g increasing."
        )
    intercept = _numbers(params.get("intercept"), "intercept", size)
    balancing = MonotoneBalancing(*shape)
    with torch.no_grad():
        balancing.slope.copy_(torch.tensor(slope, dtype=torch.float64).view(*shape))
        balancing.intercept.copy_(torch.tensor(intercept, dtype=torch.float64).view(*shape))
    return balancing


def load_balancing(source) -> Balancing:
    """A frozen balancing function from a path, JSON text, bytes, a file object or a dict."""
    data = _read(source)
    if data.get("format") != FORMAT:
        raise ValueError(
            f"'format' must be {FORMAT!r}: this is not an LSB Explorer learned function."
        )
    if data.get("version") != VERSION:
        raise ValueError(
            f"unsupported version {_short(data.get('version'))}; this build reads version "
            f"{VERSION}."
        )
    kind, params = data.get("kind"), data.get("parameters")
    if not isinstance(params, dict):
        raise ValueError("'parameters' must be an object.")
    if kind == "lsb1":
        theta = _numbers(params.get("theta"), "theta", 4)
        if max(theta) - min(theta) > 700:
            raise ValueError("'theta' spans more than 700: the softmax weights would underflow.")
        balancing = MixtureBalancing(torch.tensor(theta, dtype=torch.float64))
    elif kind == "lsb2":
        hidden = params.get("hidden")
        if isinstance(hidden, bool) or not isinstance(hidden, int) or not 1 <= hidden <= MAX_HIDDEN:
            raise ValueError(f"'hidden' must be an integer between 1 and {MAX_HIDDEN}.")
        balancing = NetworkBalancing(hidden=hidden)
        with torch.no_grad():
            balancing.layer1.weight.copy_(
                torch.tensor(_numbers(params.get("w1"), "w1", hidden), dtype=torch.float64).view(
                    hidden, 1
                )
            )
            balancing.layer1.bias.copy_(
                torch.tensor(_numbers(params.get("b1"), "b1", hidden), dtype=torch.float64)
            )
            balancing.layer2.weight.copy_(
                torch.tensor(_numbers(params.get("w2"), "w2", hidden), dtype=torch.float64).view(
                    1, hidden
                )
            )
            balancing.layer2.bias.copy_(
                torch.tensor(_numbers([params.get("b2")], "b2", 1), dtype=torch.float64)
            )
    elif kind == "lsb2-monotone":
        balancing = _monotone(params)
    else:
        raise ValueError(f"'kind' must be 'lsb1' or 'lsb2' or 'lsb2-monotone', got {_short(kind)}.")
    # on both code paths a sampler uses: the network as written (few values) and its
    # piecewise-linear form (whole lattices), over every log-ratio a target may produce
    for points in (101, DENSE_LIMIT + 1):
        s = torch.linspace(-PROBE_RANGE, PROBE_RANGE, points, dtype=torch.float64)
        with torch.no_grad():
            if not bool(torch.isfinite(balancing.log_g(s)).all()):
                raise ValueError(
                    "these parameters give a balancing function with non-finite values."
                )
    return balancing.frozen()
