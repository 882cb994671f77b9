"""A generated section of a Markdown file (``docs/reproduction.md``): the text between its
``<!-- NAME:begin ... -->`` and ``<!-- NAME:end -->`` markers, replaced in place by the command
that generates it (the RBM, Markov-network and flow experiments)."""

from __future__ import annotations

from pathlib import Path

from lsbcore.out_path import write_text


def replace_section(path, text: str, begin: str, end: str) -> None:
    """Put ``text`` (markers included) into the Markdown file ``path`` in place of the section
    between ``begin`` and ``end``, or at its end when it has none (the file is created when
    missing). Written through a temporary file renamed into place: a full disk leaves the
    previous file whole."""
    path = Path(path)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    start, stop = old.find(begin), old.find(end)
    if 0 <= start < stop:
        new = old[:start] + text + old[stop + len(end) :].lstrip("\n")
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + text
    write_text(path, new)
