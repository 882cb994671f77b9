"""Names made from text the user gave (a photo's file name) or the app chose (a problem's
name): safe characters only, and never cut in the middle of a word.

``file_stem`` is for download names (lower case, letters, digits and dashes) and
``export_stem`` the start of every file a run saves (its problem, seed and date); ``photo_title``
turns an uploaded file's name into the problem's name, so that a photo's outputs carry the
photo's own name instead of "uploaded image" for every photo.
"""

from __future__ import annotations

import datetime
import re
from pathlib import PurePosixPath, PureWindowsPath

__all__ = ["UPLOAD_TITLE", "cut_at_word", "export_stem", "file_stem", "photo_title"]

UPLOAD_TITLE = "uploaded image"
PHOTO_CHARS = 40  # a photo's name in the problem's name, at most
STEM_CHARS = 48  # the problem's part of a file name, at most (cut at a word boundary)


def cut_at_word(words: str, limit: int, sep: str = "-") -> str:
    """``words`` (joined by ``sep``) shortened to at most ``limit`` characters by dropping
    whole words from the end; a first word longer than ``limit`` is cut (no boundary exists)."""
    if len(words) <= limit:
        return words
    head = words[: limit + 1]
    cut = head.rfind(sep)
    return (head[:cut] if cut > 0 else words[:limit]).strip(sep)


def file_stem(text: str, limit: int) -> str:
    """``text`` in lower-case letters, digits and single dashes, at most ``limit`` characters,
    cut between words; empty when nothing usable is left."""
    words = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return cut_at_word(words, limit)


def export_stem(run, day: datetime.date | None = None) -> str:
    """``lsb-<problem>-seed<seed>-<date>``: the problem's name in lower-case letters, digits and
    dashes, cut between words (a photo's own file name included, so nothing odd reaches a file
    name)."""
    problem = file_stem(run.problem.name, STEM_CHARS) or "run"
    day = day or datetime.date.today()
    return f"lsb-{problem}-seed{run.config.seed}-{day.isoformat()}"


def photo_title(file_name: str | None) -> str:
    """The problem's name for an uploaded photo: its file name's stem in safe characters
    (letters, digits, dashes and underscores, so it is safe in Markdown and in file names)
    and "uploaded image", e.g. ``my-cat, uploaded image``; only "uploaded image" when the name
    gives nothing usable. A path in the name (``../x.png``, ``C:\\x.png``) counts for its last
    part only."""
    if not file_name:
        return UPLOAD_TITLE
    last = PureWindowsPath(PurePosixPath(str(file_name)).name).name
    stem = last.rsplit(".", 1)[0] if "." in last.lstrip(".") else last
    safe = cut_at_word(re.sub(r"[^A-Za-z0-9_]+", "-", stem).strip("-_"), PHOTO_CHARS)
    return f"{safe}, {UPLOAD_TITLE}" if safe else UPLOAD_TITLE
