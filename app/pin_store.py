"""Where pinned runs live between reloads: one directory per browser session, on local disk.

A session's pins are ``ROOT/<token>/<pin id>.json``. The token is 32 random hex digits, made
here and carried in the page's link as ``pins=<token>``, so a reload (or the same link in
another tab) finds the same pins; a token from a link is used only when it is exactly 32 lower-case
hex digits, and pin ids exactly 16, so no path is ever built from other text.

Bounds, enforced on every write: at most ``MAX_PINS`` pins per session, each at most
``pins.MAX_BYTES``; the whole store at most ``MAX_STORE_BYTES`` and ``MAX_SESSIONS`` sessions
(the oldest pins of other sessions go first). Cleanup on access: pins not written for
``MAX_AGE_S`` (24 h) are deleted, and so are session directories left empty that long.

No Streamlit here: ``query_params`` gives the link parameter for the page to merge in.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app import pins as pinmod
from app.pins import Pin, PinError

ROOT = Path(tempfile.gettempdir()) / "lsb-explorer-pins"
PARAM = "pins"  # the link parameter
STATE_KEY = "_pin_store"  # the session's PinStore in Session State
MAX_PINS = 8
MAX_STORE_BYTES = 64_000_000
MAX_SESSIONS = 256
MAX_AGE_S = 24 * 3600.0
SWEEP_EVERY_S = 60.0  # the whole store is swept at most this often (a session's own dir: always)
_TOKEN = re.compile(r"[0-9a-f]{32}")
_PIN_ID = re.compile(r"[0-9a-f]{16}")
_lock = threading.Lock()  # sessions are threads of one server: one writer at a time
_last_sweep = {"at": float("-inf")}  # when this server last swept the whole store


def valid_token(text) -> bool:
    return isinstance(text, str) and _TOKEN.fullmatch(text) is not None


def new_token() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True)
class Entry:
    """A pin as listed: its id, when it was written, and the pin itself."""

    pin_id: str
    written: float  # the file's mtime: pinned, renamed or uploaded
    pin: Pin


class PinStore:
    """The pins of one browser session (``token``) under ``root``."""

    def __init__(self, token: str, root: Path | None = None):
        if not valid_token(token):
            raise ValueError("a pin-set token is 32 lower-case hex digits.")
        self.token = token
        self.root = Path(root or ROOT)
        self.dir = self.root / token
        self._cache: dict[str, tuple[int, int, Pin]] = {}  # id -> (mtime_ns, size, pin)

    def exists(self) -> bool:
        return self.dir.is_dir()

    def create(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, pin_id: str) -> Path:
        if not isinstance(pin_id, str) or _PIN_ID.fullmatch(pin_id) is None:
            raise KeyError(pin_id)
        return self.dir / f"{pin_id}.json"

    def entries(self, now: float | None = None) -> list[Entry]:
        """This session's pins, oldest first; stale ones deleted, unreadable ones skipped."""
        now = time.time() if now is None else now
        out = []
        for path in _pin_files(self.dir):
            try:
                stat = path.stat()
                if now - stat.st_mtime > MAX_AGE_S:
                    path.unlink(missing_ok=True)
                    continue
                cached = self._cache.get(path.stem)
                if cached is None or cached[:2] != (stat.st_mtime_ns, stat.st_size):
                    if stat.st_size > pinmod.MAX_BYTES:
                        continue
                    cached = (stat.st_mtime_ns, stat.st_size, pinmod.from_json(path.read_bytes()))
                    self._cache[path.stem] = cached
            except (OSError, PinError):  # deleted meanwhile, or not a pin: not listed
                continue
            out.append(Entry(path.stem, stat.st_mtime, cached[2]))
        return sorted(out, key=lambda e: (e.pin.created, e.written, e.pin_id))

    def get(self, pin_id: str) -> Pin:
        for entry in self.entries():
            if entry.pin_id == pin_id:
                return entry.pin
        raise KeyError(pin_id)

    def save(self, pin: Pin, pin_id: str | None = None, now: float | None = None) -> str:
        """Write ``pin`` (a new one, or over ``pin_id``); PinError says why it cannot be kept."""
        data = pin.to_json().encode("utf-8")
        sweep(self.root, now)
        if len(data) > pinmod.MAX_BYTES:
            raise PinError(f"this run's pin would exceed {pinmod.MAX_BYTES // 1000:,} kB.")
        # what could not be read back (a diverged learned function) is refused now, not lost
        pinmod.from_json(data)
        with _lock:
            self.create()
            if pin_id is None:
                if len(list(_pin_files(self.dir))) >= MAX_PINS:
                    raise PinError(
                        f"a session keeps at most {MAX_PINS} pinned runs: delete one first."
                    )
                pin_id = secrets.token_hex(8)
            path = self._path(pin_id)
            _make_room(self.root, len(data), keep=self.dir)
            # write then rename: a reader never sees half a pin
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return pin_id

    def rename(self, pin_id: str, name: str) -> None:
        self.save(self.get(pin_id).renamed(name), pin_id)

    def delete(self, pin_id: str) -> None:
        with _lock:
            self._path(pin_id).unlink(missing_ok=True)
        self._cache.pop(pin_id, None)


def _pin_files(directory: Path):
    try:
        with os.scandir(directory) as it:
            names = [e.name for e in it if e.is_file()]
    except OSError:
        return []
    return [directory / n for n in names if n.endswith(".json") and _PIN_ID.fullmatch(n[:-5])]


def _sessions(root: Path) -> list[Path]:
    try:
        with os.scandir(root) as it:
            return [Path(e.path) for e in it if e.is_dir() and valid_token(e.name)]
    except OSError:
        return []


def sweep(root: Path | None = None, now: float | None = None, force: bool = False) -> None:
    """Delete pins older than MAX_AGE_S and session directories empty that long."""
    now = time.time() if now is None else now
    if not force and now - _last_sweep["at"] < SWEEP_EVERY_S:
        return
    _last_sweep["at"] = now
    root = Path(root or ROOT)
    with _lock:
        for directory in _sessions(root):
            try:  # before any deletion below touches it: when the set was last written
                idle = now - directory.stat().st_mtime > MAX_AGE_S
            except OSError:
                continue
            for path in _pin_files(directory):
                try:
                    if now - path.stat().st_mtime > MAX_AGE_S:
                        path.unlink(missing_ok=True)
                except OSError:
                    continue
            if idle and not _pin_files(directory):
                shutil.rmtree(directory, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile (another server on this machine): nothing to evict
        return float("inf")


def _make_room(root: Path, incoming: int, keep: Path) -> None:
    """Delete the oldest pins (and sessions) of other sessions until ``incoming`` bytes fit the
    store's bounds. Called under ``_lock``."""
    files = []
    for directory in _sessions(root):
        for path in _pin_files(directory):
            try:
                stat = path.stat()
            except OSError:
                continue
            files.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in files) + incoming
    sessions = _sessions(root)
    for _, size, path in sorted(files):
        if total <= MAX_STORE_BYTES:
            break
        if path.parent != keep:
            path.unlink(missing_ok=True)
            total -= size
    if total > MAX_STORE_BYTES:
        raise PinError("the server's pin store is full; try again later.")
    if len(sessions) > MAX_SESSIONS:
        by_age = sorted((d for d in sessions if d != keep), key=_mtime)
        for directory in by_age[: len(sessions) - MAX_SESSIONS]:
            shutil.rmtree(directory, ignore_errors=True)


def open_link(value, root: Path | None = None) -> tuple[PinStore | None, str | None]:
    """The store a link's ``pins`` value names, and a plain sentence when it names none.

    Missing: (None, None), a fresh session. Not a token, or a token whose pins are gone:
    (None, why); the page starts an empty set and says so.
    """
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    if value is None:
        return None, None
    sweep(root)
    if not valid_token(value):
        return None, (
            "The link's pins parameter is not a pin-set token (32 hex digits), so no pinned "
            "runs were loaded; pins made now start an empty set."
        )
    store = PinStore(value, root)
    if not store.exists():
        return None, (
            "No pinned runs are stored under this link (pins are deleted 24 hours after they "
            "were last written); pins made now start an empty set."
        )
    return store, None


def query_params(state: Mapping) -> dict[str, str]:
    """The link parameter that brings this session's pins back after a reload."""
    store = state.get(STATE_KEY)
    return {PARAM: store.token} if isinstance(store, PinStore) else {}
