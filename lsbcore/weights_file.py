"""Reading a network's weights file: a path or bytes, checked before anything is built.

The learned block proposals (``lsbcore.methods.block_proposals.proposal``) and the flows
(``lsbcore.methods.flows``) save ``{"shape", "state", "info"}`` with ``torch.save`` and load
it here, in this order, so that a file of any size or shape is refused in a sentence:

1. the bytes, at most a cap (``read_weights``: a larger file is never read whole);
2. the saved values, tensors and plain values only (``weights_only``: no pickled code);
3. the shape against the file: the weights a shape needs must be in the file, since building a
   model allocates them (a 1.3 kB file claiming a 65,536-site flow asked for 13 GB);
4. the model, its weights from the file, and every weight finite (a NaN weight would sample
   NaN probabilities).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import torch

FLOAT_BYTES = 4  # a weight saved as float32, the least a file can hold it in


def read_weights(source, max_bytes: int, what: str) -> bytes:
    """The bytes of ``source`` (a path or bytes), at most ``max_bytes`` of them; ``what`` names
    the weights in the sentences that refuse a missing or too large file."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"no {what} at {path}.")
        if path.stat().st_size > max_bytes:
            raise ValueError(f"{path.name} is larger than {max_bytes >> 20} MB.")
        return path.read_bytes()
    data = bytes(source)
    if len(data) > max_bytes:
        raise ValueError(f"the {what} are larger than {max_bytes >> 20} MB.")
    return data


def load_model(
    source,
    *,
    max_bytes: int,
    what: str,
    kind: str,
    build: Callable[..., torch.nn.Module],
    parameter_count: Callable[..., int],
) -> torch.nn.Module:
    """The model saved in ``source`` (a path or bytes), by the steps of the module docstring.

    ``build(**shape)`` makes the model and ``parameter_count(**shape)`` counts its weights
    without making it; ``what`` names the weights ("flow weights") and ``kind`` the file
    ("a flow's weights file") in the refusals, which are ``ValueError`` sentences.
    """
    data = read_weights(source, max_bytes, what)
    label = Path(source).name if isinstance(source, (str, Path)) else "the file"
    try:
        saved = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        shape, state = dict(saved["shape"]), saved["state"]
        needed = FLOAT_BYTES * parameter_count(**shape)
    except Exception as err:  # any malformed file: one sentence, never a traceback
        raise ValueError(f"{label} is not {kind} ({type(err).__name__}).") from err
    if needed > len(data):
        described = ", ".join(f"{key} {value:,}" for key, value in shape.items())
        raise ValueError(
            f"{label} is not {kind}: its shape ({described}) needs {_size(needed)} of weights, "
            f"but the file holds {_size(len(data))}."
        )
    try:
        model = build(**shape)
        model.load_state_dict(state)
        model.info = dict(saved.get("info", {}))
    except Exception as err:
        raise ValueError(f"{label} is not {kind} ({type(err).__name__}).") from err
    bad = [name for name, w in model.state_dict().items() if not torch.isfinite(w).all()]
    if bad:  # a NaN weight would propose NaN probabilities: refused, not sampled from
        names = ", ".join(bad[:3])
        raise ValueError(f"{label} is refused: its weights are not all finite ({names}).")
    return model


def _size(n_bytes: int) -> str:
    """A byte count for a sentence: "1.3 kB", "13,000.0 MB"."""
    if n_bytes >= 10**6:
        return f"{n_bytes / 1e6:,.1f} MB"
    return f"{n_bytes / 1e3:.1f} kB" if n_bytes >= 10**3 else f"{n_bytes} bytes"
