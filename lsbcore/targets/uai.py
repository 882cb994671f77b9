"""The UAI inference competition's model files (``MARKOV`` and ``BAYES``), read into factors.

The format (whitespace-separated numbers; line breaks carry no meaning except in messages):

    MARKOV | BAYES                   the network's type
    n                                number of variables
    c_0 c_1 ... c_{n-1}              their cardinalities (here: 2 each)
    F                                number of factors
    k v_1 ... v_k                    F scope lines, one per factor
    E  t_0 t_1 ... t_{E-1}           F tables, in scope order: E = 2^k entries each, the LAST
                                     variable of the scope changing fastest

In a ``MARKOV`` file the tables are non-negative potentials; in a ``BAYES`` file the last
variable of each scope is the child and the table is its conditional probability given the
others (rows of the parents' values, the child fastest), used as a factor as it stands. Entries
become log-tables (``log 0 = -inf``), in the order ``FactorGraph`` indexes them.

Everything else is refused in a sentence that names the line: a variable with more than two
values, a count or index that is not a whole number in range, a repeated variable in a scope, a
table whose length is not 2^k, an entry that is negative, NaN, infinite or not a number, a file
that ends early, and anything after the last table.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lsbcore.targets.base import MAX_SITES

#: Most variables in one scope (a table of 2^16 = 65,536 entries).
MAX_ARITY = 16
#: Most factors in one model.
MAX_FACTORS = 1_000_000
#: Largest file read (the competition's largest binary networks are a few MB).
MAX_UAI_BYTES = 256 * 2**20
#: Largest upload read (the app): the competition's 100-variable grids are a few kB, and the
#: reader keeps each whitespace-separated token with its line (about 60 bytes a token).
MAX_UPLOAD_BYTES = 4 * 2**20

#: Most digits of a count or an index (beyond every bound above; shown as its value up to here).
MAX_DIGITS = 20

_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class UAIModel:
    """A model read from a UAI file: its type, its size and its factors as log-tables."""

    kind: str  # "MARKOV" or "BAYES"
    n_variables: int
    scopes: tuple[tuple[int, ...], ...]
    log_tables: tuple[torch.Tensor, ...]  # [2^k] float64 each, -inf where the entry is 0

    @property
    def n_factors(self) -> int:
        return len(self.scopes)

    @property
    def n_zero_entries(self) -> int:
        """Table entries that are 0 (probability zero), over all factors."""
        return sum(int(torch.isneginf(t).sum()) for t in self.log_tables)

    def describe(self) -> str:
        """What was read, for a page: "a MARKOV network of 100 binary variables and 100
        factors, 37 of its table entries zero"."""
        zeros = self.n_zero_entries
        entries = sum(t.numel() for t in self.log_tables)
        zero_text = "none of its table entries zero"
        if zeros:
            zero_text = f"{zeros:,} of its {entries:,} table entries zero"
        plural = "s" if self.n_variables != 1 else ""
        factors = "factor" if self.n_factors == 1 else "factors"
        return (
            f"a {self.kind} network of {self.n_variables:,} binary variable{plural} and "
            f"{self.n_factors:,} {factors}, {zero_text}"
        )


def read_uai(path_or_text) -> UAIModel:
    """Read a ``MARKOV`` or ``BAYES`` model from a file path or from the file's text (a string
    or bytes that begin with the type); see the module docstring for what is refused."""
    return _Reader(_text_of(path_or_text)).model()


def read_uai_upload(data, name: str = "the upload") -> UAIModel:
    """Read an uploaded ``.uai`` file's bytes (the app's entry point): at most
    ``MAX_UPLOAD_BYTES``, UTF-8 text beginning with MARKOV or BAYES; every refusal a sentence
    that names the upload."""
    if not isinstance(name, str):
        raise ValueError(f"name must be the upload's file name (a string), got {name!r}.")
    label = repr(name[:80])
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise ValueError(f"the upload {label} must be given as bytes, got {type(data).__name__}.")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(
            f"the upload {label} holds {_size(len(data))}; at most {_size(MAX_UPLOAD_BYTES)} "
            "are read (the competition's 100-variable networks are a few kB)."
        )
    if not data.strip():
        raise ValueError(f"the upload {label} is empty; a UAI model file begins with MARKOV.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"the upload {label} is not UTF-8 text; a model file is plain text."
        ) from err
    head = text.lstrip()[:6].upper()
    if not (head.startswith("MARKOV") or head.startswith("BAYES")):
        raise ValueError(
            f"the upload {label} does not begin with a model type, MARKOV or BAYES; it is not "
            "a UAI model file."
        )
    return read_uai(text)


def _size(n_bytes: int) -> str:
    """A byte count in kB or MB for a sentence."""
    if n_bytes >= 2**20:
        return f"{n_bytes / 2**20:.1f} MB"
    return f"{n_bytes / 2**10:.1f} kB" if n_bytes >= 2**10 else f"{n_bytes} bytes"


def _text_of(path_or_text) -> str:
    """The file's text: ``path_or_text`` itself when it begins with a model type, else the
    contents of the file it names."""
    if isinstance(path_or_text, bytes):
        try:
            path_or_text = path_or_text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError("the UAI text is not UTF-8; a model file is plain text.") from err
    if isinstance(path_or_text, str):
        head = path_or_text.lstrip()[:6].upper()
        if head.startswith("MARKOV") or head.startswith("BAYES"):
            return path_or_text
        if "\n" in path_or_text or not path_or_text.strip():
            raise ValueError(
                "the UAI text must begin with its type, MARKOV or BAYES (or give a file path)."
            )
    elif not isinstance(path_or_text, os.PathLike):
        raise ValueError(
            f"path_or_text must be a file path or a UAI model's text, got "
            f"{type(path_or_text).__name__}."
        )
    path = Path(path_or_text)
    if not path.is_file():
        raise ValueError(
            f"{str(path)!r} is neither a UAI model's text (beginning with MARKOV or BAYES) nor "
            "an existing file."
        )
    size = path.stat().st_size
    if size > MAX_UAI_BYTES:
        raise ValueError(
            f"the UAI file {path.name!r} holds {size:,} bytes; at most {MAX_UAI_BYTES:,} are read."
        )
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"could not read the UAI file {path.name!r} as text: {err}.") from err


class _Reader:
    """The tokens of a UAI text with the line each is on, read front to back."""

    def __init__(self, text: str):
        self.tokens: list[str] = []
        self.lines: list[int] = []
        for number, line in enumerate(text.splitlines(), 1):
            words = line.split()
            self.tokens += words
            self.lines += [number] * len(words)
        self.last_line = max(1, len(text.splitlines()))
        self.at = 0

    def _next(self, what: str) -> tuple[str, int]:
        if self.at >= len(self.tokens):
            raise ValueError(f"the UAI file ends at line {self.last_line} before {what}.")
        token, line = self.tokens[self.at], self.lines[self.at]
        self.at += 1
        return token, line

    def _integer(self, what: str, low: int, high: int) -> tuple[int, int]:
        token, line = self._next(what)
        if not _INTEGER.fullmatch(token):
            raise ValueError(
                f"line {line} of the UAI file: {what} must be a whole number, got {token[:20]!r}."
            )
        # counted before int(), which refuses 4,300 digits (even zeros) in its own words
        significant = token.lstrip("+-").lstrip("0")
        if len(significant) > MAX_DIGITS:
            raise ValueError(
                f"line {line} of the UAI file: {what} must be between {low:,} and {high:,}, "
                f"got a number of {len(significant):,} digits."
            )
        value = int(significant or "0") * (-1 if token.startswith("-") else 1)
        if not low <= value <= high:
            raise ValueError(
                f"line {line} of the UAI file: {what} must be between {low:,} and {high:,}, "
                f"got {value:,}."
            )
        return value, line

    def model(self) -> UAIModel:
        kind, line = self._next("its type, MARKOV or BAYES")
        kind = kind.upper()
        if kind not in ("MARKOV", "BAYES"):
            raise ValueError(
                f"line {line} of the UAI file: the type must be MARKOV or BAYES, got {kind[:20]!r}."
            )
        n, _ = self._integer("the number of variables", 1, MAX_SITES)
        for i in range(n):
            values, line = self._integer(f"the number of values of variable {i}", 1, 2**31)
            if values != 2:
                raise ValueError(
                    f"line {line} of the UAI file: variable {i} has {values} values; only "
                    "binary variables (2 values) are supported."
                )
        n_factors, _ = self._integer("the number of factors", 0, MAX_FACTORS)
        scopes = [self._scope(f, n, kind) for f in range(n_factors)]
        tables = [self._table(f, len(scope)) for f, scope in enumerate(scopes)]
        if self.at < len(self.tokens):
            raise ValueError(
                f"line {self.lines[self.at]} of the UAI file: unexpected "
                f"{self.tokens[self.at][:20]!r} after the last factor's table; the file should "
                "end there."
            )
        return UAIModel(kind, n, tuple(scopes), tuple(tables))

    def _scope(self, f: int, n: int, kind: str) -> tuple[int, ...]:
        low = 1 if kind == "BAYES" else 0  # a BAYES factor holds at least its child
        k, line = self._integer(f"the scope size of factor {f}", low, MAX_ARITY)
        scope = []
        for p in range(k):
            v, line = self._integer(f"variable {p + 1} of the scope of factor {f}", 0, n - 1)
            if v in scope:
                raise ValueError(
                    f"line {line} of the UAI file: the scope of factor {f} names variable {v} "
                    "twice; each variable may appear once per scope."
                )
            scope.append(v)
        return tuple(scope)

    def _table(self, f: int, k: int) -> torch.Tensor:
        size, line = self._integer(f"the table size of factor {f}", 0, 2**MAX_ARITY)
        if size != 2**k:
            raise ValueError(
                f"line {line} of the UAI file: the table of factor {f} has {size} entries; its "
                f"scope of {k} binary variable{'s' if k != 1 else ''} needs 2^{k} = {2**k}."
            )
        entries = np.empty(size)
        for e in range(size):
            token, line = self._next(f"entry {e + 1} of the {size} in the table of factor {f}")
            if not _NUMBER.fullmatch(token):
                raise ValueError(
                    f"line {line} of the UAI file: entry {e + 1} of the table of factor {f} "
                    f"must be a number, got {token[:20]!r}."
                )
            value = float(token)
            if value < 0 or not math.isfinite(value):
                raise ValueError(
                    f"line {line} of the UAI file: entry {e + 1} of the table of factor {f} is "
                    f"{token[:20]}; entries must be finite and non-negative."
                )
            entries[e] = value
        with np.errstate(divide="ignore"):
            return torch.from_numpy(np.log(entries))


__all__ = [
    "MAX_ARITY",
    "MAX_FACTORS",
    "MAX_UPLOAD_BYTES",
    "UAIModel",
    "read_uai",
    "read_uai_upload",
]
