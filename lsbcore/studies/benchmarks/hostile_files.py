"""The hostile-file corpus (issue 47): one or more files per reader, made on demand in a folder so
that nothing hostile is stored in the repository, each with the reader a visitor's upload or a
command would use and the words of what must come of it.

Most are refused in a sentence; two GIF files are read as what they really hold (a one-pixel
frame on a 40-megapixel screen is a one-pixel photo). ``tests/test_hostile_corpus.py`` checks
the outcome and the Python memory of each; ``python -m lsbcore.studies.benchmarks.hostile``
times each in a fresh process.
"""

from __future__ import annotations

import io
import json
import sqlite3
import struct
import zipfile
import zlib
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from lsbcore.studies.sweep.store import CELL_COLUMNS

GIF_SIDE = 6_324  # the red team's screen: 39.99 megapixels, just under the 40 MP cap


@dataclass(frozen=True)
class HostileFile:
    """One file of the corpus: ``build(path)`` writes it there and returns ``path``; ``read(path)``
    hands it to ``reader`` and describes what came back (a refusal raises ``ValueError``);
    ``expect`` are words the refusal or the description must hold."""

    name: str
    reader: str
    build: Callable[[Path], Path]
    read: Callable[[Path], str]
    expect: str
    refused: bool = True


def outcome(case: HostileFile, path: Path) -> tuple[bool, str]:
    """``(refused, sentence)``: what ``case.read`` made of the file at ``path``."""
    try:
        return False, case.read(path)
    except ValueError as refusal:
        return True, str(refusal)


# ----------------------------------------------------------------------------- builders
def endless_view_file(path: Path) -> Path:
    """The red team's 8 kB results file: a valid SQLite database whose ``cells`` is a recursive
    view with every column, so it passes the header and column checks and then yields rows
    without end when read."""
    columns = ", ".join(f"n AS {c}" for c in CELL_COLUMNS)
    with closing(sqlite3.connect(path)) as db:
        db.execute(
            "CREATE VIEW cells AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            f"SELECT {columns} FROM r"
        )
        db.commit()
    return path


def contradicting_ring(n: int) -> str:
    """A MARKOV text of ``n`` variables on a ring: ``x_i = x_{i+1}`` along the chain and
    ``x_0 != x_{n-1}`` closing it. Each factor alone allows half its values, but no state has
    positive probability, and a local search only moves the one broken factor around the ring."""
    lines = ["MARKOV", str(n), " ".join(["2"] * n), str(n)]
    lines += [f"2 {i} {i + 1}" for i in range(n - 1)] + [f"2 0 {n - 1}", ""]
    lines += ["4", " 1 0 0 1"] * (n - 1) + ["4", " 0 1 1 0"]
    return "\n".join(lines) + "\n"


def sparse_file(path: Path, n_bytes: int) -> Path:
    """A file of ``n_bytes`` zeros that takes no disk (a hole): what ``/dev/zero`` would give a
    reader that trusts no size, as a regular file whose size does not lie."""
    with open(path, "wb") as f:
        f.truncate(n_bytes)
    return path


def npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    """The header of an ``.npy`` file holding ``shape`` values of ``descr``, with no values."""
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def one_pixel_gif() -> bytes:
    """Pillow's one-pixel GIF (37 bytes): the logical screen at bytes 6-9, the frame's
    descriptor (``0x2C``, left, top, width, height) at bytes 19-27."""
    buffer = io.BytesIO()
    Image.new("P", (1, 1)).save(buffer, format="GIF")
    return buffer.getvalue()


def gif_on_screen(side: int) -> bytes:
    """The red team's GIF: one pixel of frame on a ``side x side`` logical screen."""
    gif = bytearray(one_pixel_gif())
    gif[6:10] = struct.pack("<HH", side, side)
    return bytes(gif)


def gif_claiming(side: int) -> bytes:
    """A GIF whose screen and frame both claim ``side x side`` over one pixel of data."""
    gif = bytearray(gif_on_screen(side))
    assert gif[19] == 0x2C  # the frame's descriptor
    gif[24:28] = struct.pack("<HH", side, side)
    return bytes(gif)


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


_SOF_MARKERS = (0xC0, 0xC1, 0xC2)


def small_jpeg(side: int = 64, **options) -> bytes:
    """A ``side`` x ``side`` colour JPEG of random pixels (options go to Pillow's encoder)."""
    pixels = (np.random.default_rng(0).random((side, side, 3)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90, **options)
    return buffer.getvalue()


def with_jpeg_size(data: bytes, width: int, height: int) -> bytes:
    """``data`` with the size in its start-of-frame marker replaced by ``width`` x ``height``."""
    pos = 2  # after SOI
    while pos < len(data):
        marker = data[pos + 1]
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if marker in _SOF_MARKERS:  # FF Cn, length, precision, height, width
            return data[: pos + 5] + struct.pack(">HH", height, width) + data[pos + 9 :]
        pos += 2 + length
    raise ValueError("no start-of-frame marker")


def small_png(side: int = 64) -> bytes:
    pixels = (np.random.default_rng(1).random((side, side, 3)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def with_png_size(data: bytes, width: int, height: int) -> bytes:
    """``data`` with the size in its IHDR chunk replaced, and the chunk's CRC made right."""
    start = 8 + 4  # signature, then the chunk's length
    assert data[start : start + 4] == b"IHDR"
    body = b"IHDR" + struct.pack(">II", width, height) + data[start + 12 : start + 17]
    crc = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    return data[:start] + body + crc + data[start + 21 :]


def flow_claiming_a_huge_shape(path: Path) -> Path:
    """The red team's 1.3 kB flow weights file: no weights, and a shape (65,536 sites, 12
    couplings of 1,024 hidden units) whose model holds 13 GB of them."""
    shape = dict(n_sites=1 << 16, transforms=12, hidden=1024, seed=0)
    torch.save({"shape": shape, "state": {}, "info": {}}, path)
    return path


def proposal_with_nan_weights(path: Path) -> Path:
    """A block proposal whose every weight is NaN (it would propose NaN probabilities)."""
    from lsbcore.methods.block_proposals.proposal import BlockProposal

    proposal = BlockProposal(2, hidden=8)
    with torch.no_grad():
        for weight in proposal.parameters():
            weight.fill_(float("nan"))
    proposal.save(path)
    return path


def _write(data: bytes | str) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    return build


# ----------------------------------------------------------------------------- readers
def _results(path: Path) -> str:
    from lsbcore.studies.sweep.store import read_results

    return f"{len(read_results(path))} cells"


def _grid(path: Path) -> str:
    from lsbcore.studies.sweep.grid import SweepGrid

    return repr(SweepGrid.from_toml(path))


def _learned_function(path: Path) -> str:
    from lsbcore.balancing.json_io import load_balancing

    return load_balancing(path).name


def _network(path: Path) -> str:
    """Read like the dashboard's upload: the reader, then a start within the page's 1 s."""
    from lsbcore.targets.factor_graph import FactorGraph
    from lsbcore.targets.uai import read_uai_upload

    model = read_uai_upload(path.read_bytes(), path.name)
    graph = FactorGraph(model.n_variables, model.scopes, model.log_tables)
    graph.start(1, torch.Generator().manual_seed(0), seconds=1.0)
    return model.describe()


def _training_data(path: Path) -> str:
    from lsbcore.rbm.data import load_binary_data

    rows, _ = load_binary_data(path.read_bytes(), path.name)
    n = rows.shape[1]
    return f"{rows.shape[0]} rows of {n} value{'' if n == 1 else 's'}"


def _photo(path: Path) -> str:
    from lsbcore.image import load_photo

    photo = load_photo(path.read_bytes())
    height, width = photo.original_shape
    return f"a {width} x {height} photo"


def _flow(path: Path) -> str:
    from lsbcore.methods.flows.model import load_flow

    return f"a flow of {load_flow(path).n_sites} sites"


def _proposal(path: Path) -> str:
    from lsbcore.methods.block_proposals.proposal import load_proposal

    k = load_proposal(path).k
    return f"a proposal on {k} x {k} blocks"


RESULTS = "lsbcore.studies.sweep.store.read_results"
GRID = "lsbcore.studies.sweep.grid.SweepGrid.from_toml"
LEARNED = "lsbcore.balancing.load_balancing"
UAI = "lsbcore.targets.uai.read_uai_upload (+ FactorGraph.start, 1 s)"
RBM_DATA = "lsbcore.rbm.data.load_binary_data"
PHOTO = "lsbcore.image.load_photo"

_BALANCING_NAN = json.dumps(
    {"format": "lsb-explorer/balancing", "version": 1, "kind": "lsb1", "parameters": {}}
).replace('"parameters": {}', '"parameters": {"theta": [0.5, NaN]}')

CORPUS: tuple[HostileFile, ...] = (
    HostileFile("endless-view.sqlite", RESULTS, endless_view_file, _results,
                "its cells is a view, not a plain table"),
    HostileFile("zeros-8GB.toml", GRID, lambda p: sparse_file(p, 8 << 30), _grid,
                "is over 1 MB"),
    HostileFile("nested-200k.json", LEARNED, _write("[" * 200_000), _learned_function,
                "nests its lists or objects more than about"),
    HostileFile("zeros-1GB.json", LEARNED, lambda p: sparse_file(p, 1 << 30), _learned_function,
                "larger than 256 kB"),
    HostileFile("nan-theta.json", LEARNED, _write(_BALANCING_NAN), _learned_function,
                "NaN is not a number a learned function may hold"),
    HostileFile("5000-digits.uai", UAI, _write("MARKOV\n" + "9" * 5_000 + "\n"), _network,
                "got a number of 5,000 digits"),
    HostileFile("contradicting-ring.uai", UAI, _write(contradicting_ring(2_000)), _network,
                "within the search's 1 s"),
    HostileFile("overflowing-shape.npy", RBM_DATA, _write(npy_header((2, 1 << 32, 1 << 32))),
                _training_data, "18,446,744,073,709,551,616 values; at most 4,096"),
    HostileFile("lying-header.npy", RBM_DATA,
                _write(npy_header((20_000, 4_096)) + bytes(8)), _training_data,
                "(655.4 MB), but only 8 bytes follow it"),
    HostileFile("100-gifs-claiming-40MP.zip", RBM_DATA,
                _write(zipped({f"{i:03d}.gif": gif_claiming(GIF_SIDE) for i in range(100)})),
                _training_data, "at most 400 megapixels in all"),
    HostileFile("100-gifs-on-40MP-screens.zip", RBM_DATA,
                _write(zipped({f"{i:03d}.gif": gif_on_screen(GIF_SIDE) for i in range(100)})),
                _training_data, "100 rows of 1 value", refused=False),
    HostileFile("lying-8900px.jpg", PHOTO, _write(with_jpeg_size(small_jpeg(), 8_900, 8_900)),
                _photo, "header says the photo is 8900 x 8900 pixels"),
    HostileFile("lying-6000px.png", PHOTO, _write(with_png_size(small_png(), 6_000, 6_000)),
                _photo, "damaged or incomplete"),
    HostileFile("lying-frame.gif", PHOTO, _write(gif_claiming(GIF_SIDE)), _photo,
                "damaged or incomplete"),
    HostileFile("one-pixel-on-40MP-screen.gif", PHOTO, _write(gif_on_screen(GIF_SIDE)), _photo,
                "a 1 x 1 photo", refused=False),
    HostileFile("flow-13GB-shape.pt", "lsbcore.methods.flows.model.load_flow",
                flow_claiming_a_huge_shape, _flow, "MB of weights, but the file holds"),
    HostileFile("nan-proposal.pt", "lsbcore.methods.block_proposals.proposal.load_proposal",
                proposal_with_nan_weights, _proposal, "its weights are not all finite"),
)  # fmt: skip
BY_NAME = {case.name: case for case in CORPUS}
