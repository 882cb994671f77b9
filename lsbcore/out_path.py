"""A path named on the command line for a command's output: checked before any work, and a
file written whole or not at all.

Every command's output flag is declared with ``type=output_file`` or ``type=output_folder``,
so argparse checks it while it reads the command line, before anything runs, and refuses it in
one sentence (exit status 2): a name longer than the file system allows, a folder that does
not exist (nothing is created on the way: a mistyped folder is a mistake), a folder where a
file is wanted or the reverse, a device or other non-regular file, and a place where nothing
can be created (found by creating and removing a probe: permission bits do not tell on
``/proc``, nor for root).

A symbolic link is refused, neither followed nor replaced: renaming a new file or folder over it
would cut the user's link, and following it would write somewhere the command line does not
name. ``write_text``, ``write_json`` and ``write_bytes`` write through a temporary file in the
same folder, renamed into place, so a full disk or an interrupt leaves the previous file (or
none), never a part of the new one.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import tempfile
from pathlib import Path

__all__ = [
    "OutPathError",
    "check_file",
    "check_folder",
    "output_file",
    "output_folder",
    "shown",
    "write_bytes",
    "write_json",
    "write_text",
]

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


def _named(path, flag: str) -> str:
    """How a message names the path: with its flag, or alone (argparse names the flag)."""
    return f"{flag} {shown(path)}" if flag else shown(path)


def _name_problem(path: Path, flag: str) -> str | None:
    size = len(os.fsencode(path))
    if size >= PATH_MAX:
        return f"{_named(path, flag)} is {size:,} bytes long; a path holds at most {PATH_MAX - 1:,}"
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            which = "" if part == str(path) else f" in it, {shown(part)},"
            return (
                f"{_named(path, flag)}: a name{which} is {size:,} bytes long; a file or folder "
                f"name holds at most {NAME_MAX}"
            )
    return None


def _folder_problem(folder: Path, path: Path, flag: str) -> str | None:
    """A sentence when ``folder`` (where ``path`` goes) is missing, a file, or not writable."""
    if not os.path.lexists(folder):
        return f"{_named(path, flag)}: the folder {shown(folder)} does not exist"
    if not folder.is_dir():
        return (
            f"{_named(path, flag)}: {shown(folder)} is a file, so nothing can be created under it"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=folder))
    except OSError as err:
        return f"{_named(path, flag)}: {shown(folder)} is not writable ({err.strerror or err})"
    return None


def _link_problem(path: Path, flag: str, what: str) -> str | None:
    if not path.is_symlink():
        return None
    return (
        f"{_named(path, flag)} is a symbolic link to {shown(os.readlink(path))}; name the "
        f"{what} itself (a link is neither followed nor replaced)"
    )


def _parent(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def check_folder(path, flag: str = "") -> None:
    """Raise ``OutPathError`` unless ``path`` is an existing folder or a new name in an existing
    folder, and writable: the folder's parent (where it is created or renamed into place) and
    the folder itself when it exists."""
    path = Path(path)
    problem = _name_problem(path, flag) or _link_problem(path, flag, "folder")
    if problem is None and path.exists() and not path.is_dir():
        problem = f"{_named(path, flag)} is a file, not a folder"
    if problem is None:
        problem = _folder_problem(_parent(path), path, flag)
    if problem is None and path.is_dir():
        problem = _folder_problem(path, path, flag)
    if problem:
        raise OutPathError(problem)


def check_file(path, flag: str = "") -> None:
    """Raise ``OutPathError`` unless ``path`` is a regular file or a new name, in an existing
    folder where a file can be created (the temporary file is created beside it)."""
    path = Path(path)
    problem = _name_problem(path, flag) or _link_problem(path, flag, "file")
    if problem is None and path.is_dir():
        problem = f"{_named(path, flag)} is a folder; name a file in it"
    elif problem is None and path.exists() and not path.is_file():
        problem = f"{_named(path, flag)} is not a regular file (a device, a pipe or a socket)"
    if problem is None:
        problem = _folder_problem(_parent(path), path, flag)
    if problem:
        raise OutPathError(problem)


def output_file(text: str) -> Path:
    """The argparse ``type`` of a flag that names an output file: checked by ``check_file``
    while the command line is read (argparse says ``argument --out: ...`` and exits 2)."""
    try:
        check_file(text)
    except OutPathError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return Path(text)


def output_folder(text: str) -> Path:
    """The argparse ``type`` of a flag that names an output folder (``check_folder``)."""
    try:
        check_folder(text)
    except OutPathError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return Path(text)


def write_bytes(path, data: bytes) -> None:
    """``data`` into ``path`` through a temporary file in the same folder, flushed to disk and
    renamed over ``path``: on any failure (an interrupt included) the temporary file is removed
    and ``path`` holds what it held before. The folder is created when missing (it may have
    been removed during a long run)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a short prefix: the temporary name must fit where a 255-byte name already does
    handle, temporary = tempfile.mkstemp(
        prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent
    )
    try:
        os.fchmod(handle, _mode(path))  # mkstemp's 0600 would hide the file from the group
        remaining = memoryview(data)
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


def _mode(path: Path) -> int:
    """The permissions of the file ``path`` replaces, or a new file's under the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        pass
    umask = 0o022
    try:  # read, not set: os.umask() would change it for every thread for a moment
        with open("/proc/self/status", encoding="ascii") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return 0o666 & ~umask


def write_text(path, text: str) -> None:
    """``text`` (UTF-8) into ``path``, whole or not at all (``write_bytes``)."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path, value, indent: int | None = 1) -> None:
    """``value`` as JSON (and a final newline) into ``path``, whole or not at all."""
    write_text(path, json.dumps(value, indent=indent) + "\n")
