"""Where pinned runs live between reloads: one directory per pin set, on local disk, readable by
the server's user only.

A set's pins are ``ROOT/<token>/<pin id>.json``. The token is 32 random hex digits, made here
and carried in the page's link as ``pins=<token>``, so a reload (or the same link in another
tab) finds the same pins; a token from a link is used only when it is exactly 32 lower-case hex
digits, and pin ids exactly 16, so no path is ever built from other text. Whoever has a set's
link can read, rename, delete and add pins in that set, and nothing else.

Quotas, checked on every write, and why these numbers:

- a set holds at most ``MAX_PINS`` (8) pins, each at most ``pins.MAX_BYTES`` (1 MB) as written
  after validation, and at most ``MAX_SET_BYTES`` (3 MB) together: a pin of the Ising page with
  every sampler and a 500-lag autocorrelation is about 80 kB (150 kB at most with numbers of
  full precision), so eight real pins fit several times over, eight of 1 MB do not;
- each visitor (a browser tab, and its network address) may write so many pins a minute and
  keep so many sets (``app.pin_allowance``): one visitor opening fresh sessions by the hundred
  gets a sentence saying when it may pin again, not the whole store;
- the store holds at most ``MAX_STORE_BYTES`` (64 MB) and ``MAX_SETS`` (256) sets. When a write
  would pass either, the sets unused for longer than ``IDLE_S`` (1 h) are removed, the longest
  unused first, until it fits; only when every other set was used within the hour is the pin
  refused (``StoreFull``), with a sentence saying when the first of them falls idle.

A set is *used* when a page opens its link, draws with it (every full run of a page that holds
it: ``touch``), lists its pins, or writes or deletes one; its directory's mtime is the time of
its last use (the sweep, which also changes the directory, puts that time back). So a set that
someone has open on a page that runs is never removed under them; a set nobody used for an hour
may be, but only to make room for a pin the store could not keep otherwise.

Expiry is by age only: a pin not written (pinned, renamed or uploaded) for ``MAX_AGE_S``
(24 h) is deleted and counted in the set's ``expired`` file, so that its page says why its pins
are gone (``expired_notice``); that count is kept another ``MAX_AGE_S``, then an empty set's
directory goes. Every file in a set's directory counts against both quotas, partial writes
(``*.tmp``) included: a write that fails removes its ``.tmp`` at once, and a ``.tmp`` older
than ``TMP_AGE_S`` is a crashed server's and is swept.

Owner-only: the root is made 0700, set directories 0700 and files 0600. Before each use the
root is checked (``root_problem``): a symbolic link, not a folder, a folder of another user or
one that other users may open switches pins off with a sentence, and nothing in it is read or
written. Set directories are used only when they are real directories of the server's user,
and files are opened without following symbolic links.

No Streamlit here: ``query_params`` gives the link parameter for the page to merge in.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app import pins as pinmod
from app.pin_allowance import Allowance, SetInfo, Visitor, wait_text
from app.pins import Pin, PinError

# one root per user of the machine, so that two users' servers never meet in one folder
ROOT = Path(tempfile.gettempdir()) / f"lsb-explorer-pins-{os.getuid()}"
PARAM = "pins"  # the link parameter
STATE_KEY = "_pin_store"  # the session's PinStore in Session State
MAX_PINS = 8
MAX_SET_BYTES = 3_000_000
MAX_STORE_BYTES = 64_000_000
MAX_SETS = 256
MAX_AGE_S = 24 * 3600.0
IDLE_S = 3600.0  # a set unused this long may be removed to make room for a newcomer's pin
TMP_AGE_S = 60.0  # a write takes milliseconds: a .tmp this old was left by a crash
SWEEP_EVERY_S = 60.0  # the whole store is swept at most this often (a set's own dir: always)
EXPIRED = "expired"  # a set's count of pins removed by age
_TOKEN = re.compile(r"[0-9a-f]{32}")
_PIN_ID = re.compile(r"[0-9a-f]{16}")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_lock = threading.Lock()  # sessions are threads of one server: one writer at a time
_last_sweep = {"at": float("-inf")}  # when this server last swept the whole store
_allowances: dict[Path, Allowance] = {}  # each store's visitors (tests use stores of their own)


class StoreFull(PinError):
    """The store-wide caps are reached and every other set is in use: the pin is fine, the
    server has no room for it yet."""


def full_message(wait_s: float) -> str:
    return (
        "the server's pin store is full and every pin set in it was used within the last "
        f"hour, so you can pin again in {wait_text(wait_s)}; keep this pin as JSON meanwhile "
        "and add it from the file then."
    )


def allowance(root: Path | None = None) -> Allowance:
    """What the visitors of the store at ``root`` did lately (kept by this server process)."""
    return _allowances.setdefault(Path(root or ROOT), Allowance())


def valid_token(text) -> bool:
    return isinstance(text, str) and _TOKEN.fullmatch(text) is not None


def new_token() -> str:
    return secrets.token_hex(16)


def server_uid() -> int:
    """The user the server runs as: the only owner the store's folders may have."""
    return os.getuid()


def root_problem(root: Path | None = None) -> str | None:
    """None when ``root`` is the server's own private folder (made 0700 when missing);
    otherwise the sentence that says why pins are switched off."""
    root = Path(root or ROOT)
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        return _off(root, f"cannot be made ({err.strerror})")
    try:
        info = os.lstat(root)
    except OSError as err:
        return _off(root, f"cannot be read ({err.strerror})")
    if stat.S_ISLNK(info.st_mode):
        return _off(root, "is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        return _off(root, "is not a folder")
    if info.st_uid != server_uid():
        return _off(root, "belongs to another user")
    if info.st_mode & 0o077:
        return _off(root, f"may be opened by other users (mode {stat.S_IMODE(info.st_mode):o})")
    return None


def _off(root: Path, why: str) -> str:
    return (
        f"pins are switched off on this server: its pin folder {str(root)[:200]} {why}, and pins "
        "are kept only in a folder of the server's own user that no other user may open."
    )


@dataclass(frozen=True)
class Entry:
    """A pin as listed: its id, when it was written, and the pin itself."""

    pin_id: str
    written: float  # the file's mtime: pinned, renamed or uploaded
    pin: Pin


class PinStore:
    """The pins of one pin set (``token``) under ``root``."""

    def __init__(self, token: str, root: Path | None = None):
        if not valid_token(token):
            raise ValueError("a pin-set token is 32 lower-case hex digits.")
        self.token = token
        self.root = Path(root or ROOT)
        self.dir = self.root / token
        self._cache: dict[str, tuple[int, int, Pin]] = {}  # id -> (mtime_ns, size, pin)

    def exists(self) -> bool:
        return _own_dir(self.dir)

    def _path(self, pin_id: str) -> Path:
        if not isinstance(pin_id, str) or _PIN_ID.fullmatch(pin_id) is None:
            raise KeyError(pin_id)
        return self.dir / f"{pin_id}.json"

    def entries(self, now: float | None = None) -> list[Entry]:
        """This set's pins, oldest first; expired ones deleted, unreadable ones skipped."""
        now = time.time() if now is None else now
        if root_problem(self.root) or not self.exists():
            return []
        with _lock:
            _expire(self.dir, now)
            self._touch(now)
        out = []
        for name, info in _files(self.dir):
            if not _is_pin(name) or info.st_size > pinmod.MAX_BYTES:
                continue
            pin_id = name[:-5]
            cached = self._cache.get(pin_id)
            if cached is None or cached[:2] != (info.st_mtime_ns, info.st_size):
                try:
                    pin = pinmod.from_json(_read(self.dir / name, pinmod.MAX_BYTES))
                except (OSError, PinError):  # deleted meanwhile, or not a pin: not listed
                    continue
                cached = self._cache[pin_id] = (info.st_mtime_ns, info.st_size, pin)
            out.append(Entry(pin_id, info.st_mtime, cached[2]))
        return sorted(out, key=lambda e: (e.pin.created, e.written, e.pin_id))

    def expired(self) -> int:
        """How many of this set's pins were removed by age (in the last day or so)."""
        return _expired_count(self.dir) if self.exists() else 0

    def get(self, pin_id: str) -> Pin:
        for entry in self.entries():
            if entry.pin_id == pin_id:
                return entry.pin
        raise KeyError(pin_id)

    def touch(self, now: float | None = None) -> None:
        """This set is in use now (a page that holds it ran): not removed for ``IDLE_S``."""
        now = time.time() if now is None else now
        with _lock:
            self._touch(now)

    def _touch(self, now: float) -> None:
        if self.exists():
            os.utime(self.dir, (now, now), follow_symlinks=False)

    def save(
        self,
        pin: Pin,
        pin_id: str | None = None,
        now: float | None = None,
        visitor: Visitor | None = None,
    ) -> str:
        """Write ``pin`` (a new one, or over ``pin_id``) for ``visitor``; PinError says why it
        cannot be kept (``StoreFull`` when only the store-wide caps stand in the way). Without
        a visitor (tools and tests of the store's own caps) no visitor's allowance applies."""
        now = time.time() if now is None else now
        problem = root_problem(self.root)
        if problem:
            raise PinError(problem)
        data = pin.to_json().encode("utf-8")  # what counts: the pin as validated, not a file
        if len(data) > pinmod.MAX_BYTES:
            raise PinError(f"this run's pin would exceed {pinmod.MAX_BYTES // 1000:,} kB.")
        # what could not be read back (a diverged learned function) is refused now, not lost
        pinmod.from_json(data)
        sweep(self.root, now)
        with _lock:
            if pin_id is None:
                pin_id = secrets.token_hex(8)
            path = self._path(pin_id)
            files = dict(_files(self.dir)) if self.exists() else {}
            old = files[path.name].st_size if path.name in files else None
            if old is None and sum(map(_is_pin, files)) >= MAX_PINS:
                raise PinError(f"a pin set keeps at most {MAX_PINS} pinned runs: delete one first.")
            growth = len(data) - (old or 0)
            if sum(info.st_size for info in files.values()) + growth > MAX_SET_BYTES:
                raise PinError(
                    f"a pin set keeps at most {MAX_SET_BYTES // 1000:,} kB of pins, and this "
                    "one would exceed it: delete one first."
                )
            stored = _stored(self.root)
            new_set = self.token not in stored
            if visitor is not None:
                why = allowance(self.root).refusal(visitor, self.token, growth, stored, now)
                if why:
                    raise PinError(why)
            _make_room(self.root, stored, self.token, growth, now)
            try:
                self._make_dir()
                _write(self.dir, path.name, data)
                self._cache.pop(pin_id, None)  # a rewrite may keep its size and mtime
                self._touch(now)
            except OSError as err:
                raise PinError(
                    f"the server could not write the pin ({err.strerror or 'error'}), so it was "
                    "not kept; keep it as JSON and add it from the file later."
                ) from err
            if visitor is not None:
                allowance(self.root).record(visitor, self.token, new_set, now)
        return pin_id

    def _make_dir(self) -> None:
        try:
            os.mkdir(self.dir, 0o700)
        except FileExistsError:
            pass
        if not self.exists():
            raise PinError("this pin set's folder on the server is not one the server made.")

    def rename(
        self, pin_id: str, name: str, visitor: Visitor | None = None, now: float | None = None
    ) -> None:
        self.save(self.get(pin_id).renamed(name), pin_id, now, visitor)

    def delete(self, pin_id: str, now: float | None = None) -> None:
        path = self._path(pin_id)
        if not self.exists():
            return
        with _lock:
            path.unlink(missing_ok=True)
            _remove_if_empty(self.dir)  # the set's last pin: no folder left to count
            self._touch(time.time() if now is None else now)
        self._cache.pop(pin_id, None)


def expired_notice(store: PinStore) -> str | None:
    """The sentence for a set whose pins were removed by age, or None."""
    count = store.expired()
    if not count:
        return None
    which = "Your pin expired" if count == 1 else f"Your {count:,} pins expired"
    return f"{which}: pins are kept 24 hours after they were last written."


# ----------------------------------------------------------------------------- files
def _is_pin(name: str) -> bool:
    return name.endswith(".json") and _PIN_ID.fullmatch(name[:-5]) is not None


def _own_dir(path: Path) -> bool:
    """A real directory (not a symbolic link) of the server's user."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == server_uid()


def _files(directory: Path) -> list[tuple[str, os.stat_result]]:
    """The regular files of ``directory`` with their stat (symbolic links are not files)."""
    out = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                try:
                    if entry.is_file(follow_symlinks=False):
                        out.append((entry.name, entry.stat(follow_symlinks=False)))
                except OSError:  # removed meanwhile
                    continue
    except OSError:
        return []
    return out


def _sets(root: Path) -> list[Path]:
    try:
        with os.scandir(root) as it:
            return [
                Path(e.path) for e in it if valid_token(e.name) and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []


def _stored(root: Path) -> dict[str, SetInfo]:
    """Token -> the set's bytes (every file in its directory, partial writes included), its
    last use (the directory's mtime) and when its newest file expires."""
    out = {}
    for directory in _sets(root):
        try:
            used = os.lstat(directory).st_mtime
        except OSError:  # removed meanwhile
            continue
        files = [info for _, info in _files(directory)]
        newest = max((info.st_mtime for info in files), default=used)
        out[directory.name] = SetInfo(
            bytes=sum(info.st_size for info in files), used=used, expires=newest + MAX_AGE_S
        )
    return out


def _make_room(root: Path, stored: dict[str, SetInfo], token: str, growth: int, now: float) -> None:
    """Room for ``growth`` bytes in set ``token`` (a new set when not in ``stored``): the sets
    unused for longer than IDLE_S are removed, the longest unused first, until it fits;
    StoreFull, saying when the first set falls idle, when it still does not. Under ``_lock``."""
    new_set = token not in stored

    def fits() -> bool:
        total = sum(s.bytes for s in stored.values()) + growth
        return not (new_set and len(stored) >= MAX_SETS) and total <= MAX_STORE_BYTES

    idle = sorted((s.used, t) for t, s in stored.items() if t != token and now - s.used > IDLE_S)
    for _, other in idle:
        if fits():
            return
        if _remove_set(root / other):
            del stored[other]
    if not fits():
        soonest = min((s.used for t, s in stored.items() if t != token), default=now)
        raise StoreFull(full_message(soonest + IDLE_S - now))


def _remove_set(directory: Path) -> bool:
    """Delete an unused set's files and directory; True when it is gone."""
    for name, _ in _files(directory):
        try:
            os.unlink(directory / name)
        except FileNotFoundError:
            continue
    _remove_if_empty(directory)
    return not os.path.lexists(directory)


def _read(path: Path, limit: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    with open(fd, "rb") as file:
        return file.read(limit + 1)


def _write(directory: Path, name: str, data: bytes) -> None:
    """``directory/name`` holds ``data``, or is as it was: written to a new ``.tmp`` (0600,
    never through a link) and renamed over it, so a reader never sees half a file; a write
    that fails (a full disk) removes its ``.tmp`` at once."""
    tmp = directory / f"{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        with open(fd, "wb") as file:
            file.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _expired_count(directory: Path) -> int:
    try:
        text = _read(directory / EXPIRED, 12).decode("ascii")
    except (OSError, UnicodeDecodeError):
        return 0
    return int(text) if text.isdigit() else 0


def _remove_if_empty(directory: Path) -> None:
    try:
        os.rmdir(directory)  # fails, harmlessly, while anything is left in it
    except OSError:
        pass


def _expire(directory: Path, now: float) -> None:
    """Delete the set's pins older than MAX_AGE_S (counted in its EXPIRED file), a count older
    than that, and partial writes older than TMP_AGE_S; the directory goes once empty.
    The directory's mtime (its last use) is put back: expiring is not using. Called under
    ``_lock``."""
    try:
        last_use = os.lstat(directory)
    except OSError:
        return
    expired = 0
    for name, info in _files(directory):
        idle = now - info.st_mtime
        pin = _is_pin(name)
        if (
            (pin or name == EXPIRED)
            and idle > MAX_AGE_S
            or name.endswith(".tmp")
            and idle > TMP_AGE_S
        ):
            try:
                os.unlink(directory / name)
            except FileNotFoundError:
                continue
            expired += pin
    if expired:
        count = min(_expired_count(directory) + expired, 10**9)
        try:
            _write(directory, EXPIRED, str(count).encode("ascii"))
        except OSError:  # a full disk: the page says less, nothing else is lost
            pass
    _remove_if_empty(directory)
    try:
        os.utime(directory, ns=(last_use.st_atime_ns, last_use.st_mtime_ns), follow_symlinks=False)
    except OSError:  # removed: it was empty
        pass


def sweep(root: Path | None = None, now: float | None = None, force: bool = False) -> None:
    """Expire old pins, counts and partial writes in every set, and remove empty sets."""
    now = time.time() if now is None else now
    if not force and now - _last_sweep["at"] < SWEEP_EVERY_S:
        return
    _last_sweep["at"] = now
    root = Path(root or ROOT)
    if root_problem(root):
        return
    with _lock:
        for directory in _sets(root):
            _expire(directory, now)


# ----------------------------------------------------------------------------- the link
def open_link(
    value, root: Path | None = None, now: float | None = None
) -> tuple[PinStore | None, str | None]:
    """The store a link's ``pins`` value names, and a plain sentence when it names none.

    Missing: (None, None), a fresh session. Not a token, a token whose pins are gone, or pins
    switched off: (None, why); the page starts an empty set and says so.
    """
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    if value is None:
        return None, None
    problem = root_problem(root)
    if problem:
        return None, f"No pinned runs were loaded: {problem}"
    sweep(root, now)
    if not valid_token(value):
        return None, (
            "The link's pins parameter is not a pin-set token (32 hex digits), so no pinned "
            "runs were loaded; pins made now start an empty set."
        )
    store = PinStore(value, root)
    if not store.exists():
        return None, (
            "No pinned runs are stored under this link (pins are deleted 24 hours after they "
            "were last written, or after an hour unused when the store is full); pins made now "
            "start an empty set."
        )
    store.touch(now)
    return store, None


def query_params(state: Mapping) -> dict[str, str]:
    """The link parameter that brings this session's pins back after a reload."""
    store = state.get(STATE_KEY)
    return {PARAM: store.token} if isinstance(store, PinStore) else {}
