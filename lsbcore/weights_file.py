"""Reading a network's weights file: a path or bytes, its size capped before anything is read.

The learned block proposals (``lsbcore.methods.block_proposals.proposal``) and the flows
(``lsbcore.methods.flows``)
save with ``torch.save`` and load with ``weights_only``; this is the part of loading that reads
the bytes, so that an upload or a path of any size is refused in a sentence, never read whole.
"""

from __future__ import annotations

from pathlib import Path


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
