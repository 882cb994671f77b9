"""A path named on the command line for a command's output: checked before any work, and a
file written whole or not at all.

The experiment commands (``python -m lsbcore.experiment``, its ``--target rbm-digits`` and
``--target markov-networks``) and ``python -m lsbcore.studies.reproduce`` run for minutes to
hours before they write, so each output path is checked first and refused in one sentence: a
name longer than the file system allows, a folder where a file is wanted or the reverse, a
device or other non-regular file, and a place where nothing can be created (found by creating
and removing a probe: permission bits do not tell on ``/proc``, nor for root).

A symbolic link is refused, neither followed nor replaced: renaming a new file or folder over it
would cut the user's link, and following it would write somewhere the command line does not
name. ``write_text`` writes through a temporary file in the same folder, renamed into place, so
a full disk or an interrupt leaves the previous file (or none), never a part of the new one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["OutPathError", "check_file", "check_folder", "shown", "write_text"]

NAME_MAX = 255  # bytes in one path component on Linux file systems (ext4, tmpfs, xfs)
PATH_MAX = 4096  # bytes in a whole path, its terminating NUL included


class OutPathError(ValueError):
    """An output path that cannot be used; the message says why, in a sentence."""


def shown(path) -> str:
    """``path`` quoted for a message, its middle elided when long (a 300-character name would
    bury the sentence)."""
    text = str(path)
    if len(text) > 80:
        text = f"{text[:40]}…{text[-20:]}"
    return repr(text)


def _name_problem(path: Path, flag: str) -> str | None:
    size = len(os.fsencode(path))
    if size >= PATH_MAX:
        return f"{flag} {shown(path)} is {size:,} bytes long; a path holds at most {PATH_MAX - 1:,}"
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            which = "" if part == str(path) else f" in it, {shown(part)},"
            return (
                f"{flag} {shown(path)}: a name{which} is {size:,} bytes long; a file or folder "
                f"name holds at most {NAME_MAX}"
            )
    return None


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (as a link or anything else)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def _probe_problem(folder: Path, path: Path, flag: str) -> str | None:
    """A sentence when nothing can be created in ``folder`` (the folder ``path`` goes into)."""
    if not folder.is_dir():
        return (
            f"{flag} {shown(path)}: {shown(folder)} is a file, so nothing can be created under it"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=folder))
    except OSError as err:
        return f"{flag} {shown(path)}: {shown(folder)} is not writable ({err.strerror or err})"
    return None


def _link_problem(path: Path, flag: str, what: str) -> str | None:
    if not path.is_symlink():
        return None
    return (
        f"{flag} {shown(path)} is a symbolic link to {shown(os.readlink(path))}; name the {what} "
        "itself (a link is neither followed nor replaced)"
    )


def check_folder(path, flag: str) -> None:
    """Raise ``OutPathError`` unless ``path`` is an existing folder or a name where one can be
    created, and writable: the folder's parent (where it is created or renamed into place) and
    the folder itself when it exists."""
    path = Path(path)
    problem = _name_problem(path, flag) or _link_problem(path, flag, "folder")
    if problem is None and path.exists() and not path.is_dir():
        problem = f"{flag} {shown(path)} is a file, not a folder"
    if problem is None:
        problem = _probe_problem(_nearest_existing(path.parent), path, flag)
    if problem is None and path.is_dir():
        problem = _probe_problem(path, path, flag)
    if problem:
        raise OutPathError(problem)


def check_file(path, flag: str) -> None:
    """Raise ``OutPathError`` unless ``path`` is a regular file or a new name, in a place where
    a file can be created (``write_text`` creates its temporary file beside it)."""
    path = Path(path)
    problem = _name_problem(path, flag) or _link_problem(path, flag, "file")
    if problem is None and path.is_dir():
        problem = f"{flag} {shown(path)} is a folder; name a file in it"
    elif problem is None and path.exists() and not path.is_file():
        problem = f"{flag} {shown(path)} is not a regular file (a device, a pipe or a socket)"
    if problem is None:
        problem = _probe_problem(_nearest_existing(path.parent), path, flag)
    if problem:
        raise OutPathError(problem)


def write_text(path, text: str) -> None:
    """``text`` (UTF-8) into ``path`` through a temporary file in the same folder, flushed to
    disk and renamed over ``path``: on any failure the temporary file is removed and ``path``
    holds what it held before. The folder is created when missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a short prefix: the temporary name must fit where a 255-byte name already does
    handle, temporary = tempfile.mkstemp(
        prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent
    )
    try:
        remaining = memoryview(text.encode("utf-8"))
        while remaining:
            remaining = remaining[os.write(handle, remaining) :]
        os.fsync(handle)  # a full disk may only tell here
        os.close(handle)
        handle = -1
        os.replace(temporary, path)
    except BaseException:
        if handle >= 0:
            os.close(handle)
        Path(temporary).unlink(missing_ok=True)
        raise
