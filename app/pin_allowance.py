"""Each visitor's fair share of the pin store: a rate of writes and a quota of pin sets, per
browser tab and per network address, so that one visitor cannot fill the store for everyone.

A visitor is one browser tab (a Streamlit session, ``Visitor.tab``) at one network address
(``Visitor.address``). Every limit holds for the tab and for its address separately:

- rate: at most ``writes`` pins written (pinned, renamed or uploaded) in any ``WINDOW_S`` (60 s);
  deleting is never limited;
- quota: at most ``sets`` pin sets started by the visitor kept at once, holding at most
  ``bytes`` together. A set counts against whoever first wrote it (a tab that pins into a set
  opened from someone's link starts nothing) for as long as it is stored: until its pins
  expire, are deleted, or it is removed as unused to make room for a newcomer.

Addresses: the address is what the server saw. Streamlit 1.67 runs on uvicorn, which takes it from
the TCP connection and honours an ``X-Forwarded-For`` header only from the proxies in
``FORWARDED_ALLOW_IPS`` (by default the machine itself); a header from anyone else is ignored, so it
cannot be forged from outside. An IPv6 address counts by its /64 (one household's prefix), and
an unknown or loopback address (a local visitor, or a local proxy that sends no header) counts as
one address, ``LOCAL``.

What a visitor did is kept in memory only (tokens and times, no more), per store and per server
process, so a restart forgets it. It stays small: write times older than ``WINDOW_S`` and sets no
longer stored are dropped on every check.

No Streamlit here and no disk: the store passes in the sets it holds and the time.
"""

from __future__ import annotations

import ipaddress
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

WINDOW_S = 60.0
LOCAL = "local"


@dataclass(frozen=True)
class Limit:
    writes: int  # per WINDOW_S
    sets: int  # kept at once
    bytes: int  # in those sets together


# a tab keeps one set (its own, made on its first pin); an address is shared by the people
# behind one router (a classroom): 16 sets and 16 MB are a quarter of the store's 64 MB at most
LIMITS = {
    "browser tab": Limit(writes=10, sets=1, bytes=3_000_000),
    "network address": Limit(writes=30, sets=16, bytes=16_000_000),
}


@dataclass(frozen=True)
class Visitor:
    tab: str  # the session's own random id
    address: str | None  # as Streamlit reports it (``st.context.ip_address``); None: unknown


@dataclass(frozen=True)
class SetInfo:
    """A stored set: its size, its last use and when its newest pin expires."""

    bytes: int
    used: float  # when a page last opened, drew, listed or wrote it (``pin_store``)
    expires: float  # when its newest pin expires, unless written again


def address_key(address: str | None) -> str:
    """The address a limit counts by: IPv4 as it is, IPv6 by its /64, unknown and loopback as
    one (``LOCAL``)."""
    try:
        ip = ipaddress.ip_address((address or "").split("%")[0])
    except ValueError:
        return LOCAL if not address else address[:64]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return LOCAL
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def keys(visitor: Visitor) -> dict[str, tuple[str, str]]:
    """The visitor's name under each limit: its tab, its address."""
    return {
        "browser tab": ("tab", visitor.tab),
        "network address": ("address", address_key(visitor.address)),
    }


def wait_text(seconds: float) -> str:
    """A wait as a reader wants it: "12 seconds" and "5 minutes" rounded up (never too soon),
    "3 hours" rounded (from 2 hours on, a minute either way does not matter)."""
    seconds = max(seconds, 1.0)
    if seconds <= 120:
        count, unit = math.ceil(seconds), "second"
    elif seconds <= 7200:
        count, unit = math.ceil(seconds / 60), "minute"
    else:
        count, unit = round(seconds / 3600), "hour"
    return f"{count:,} {unit}{'s' if count != 1 else ''}"


class Allowance:
    """What each visitor of one store wrote in the last minute and which sets it started."""

    def __init__(self) -> None:
        self._writes: dict[tuple[str, str], deque[float]] = {}
        self._started: dict[tuple[str, str], set[str]] = {}

    def refusal(
        self,
        visitor: Visitor,
        token: str,
        growth: int,
        stored: Mapping[str, SetInfo],
        now: float,
    ) -> str | None:
        """Why ``visitor`` may not write ``growth`` bytes into set ``token`` now (one sentence,
        saying when it may), or None. ``stored``: the sets the store holds now."""
        self._forget(stored, now)
        new_set = token not in stored
        for kind, key in keys(visitor).items():
            limit = LIMITS[kind]
            writes = self._writes.get(key, ())
            if len(writes) >= limit.writes:
                wait = wait_text(writes[-limit.writes] + WINDOW_S - now)
                count = f"{len(writes)} pin{'s' if len(writes) != 1 else ''}"
                return (
                    f"this {kind} has pinned, renamed or uploaded {count} in the last minute, "
                    f"the most one {kind} may, so you can pin again in {wait}."
                )
            held = self._started.get(key, set())
            if token not in held and not new_set:
                continue  # a set someone else started: its own quota bounds it
            first = min((stored[t].expires for t in held), default=now)
            when = f"in {wait_text(first - now)}, when the first of them expires"
            if new_set and len(held) >= limit.sets:
                which = "a pin set" if len(held) == 1 else f"{len(held)} pin sets"
                return (
                    f"this {kind} already keeps {which} on the server, the most one {kind} may, "
                    f"so pin into one from its link, or start another {when}."
                )
            if sum(stored[t].bytes for t in held) + growth > limit.bytes:
                return (
                    f"the pin sets this {kind} started hold {limit.bytes // 1_000_000} MB at "
                    f"most and this pin would exceed it, so delete some pins or try again {when}."
                )
        return None

    def record(self, visitor: Visitor, token: str, new_set: bool, now: float) -> None:
        """``visitor`` wrote into ``token`` at ``now`` (``new_set``: it started that set)."""
        for key in keys(visitor).values():
            self._writes.setdefault(key, deque()).append(now)
            if new_set:
                self._started.setdefault(key, set()).add(token)

    def _forget(self, stored: Mapping[str, SetInfo], now: float) -> None:
        """Drop writes older than the window and sets no longer stored (so this stays small)."""
        for key, writes in list(self._writes.items()):
            while writes and writes[0] <= now - WINDOW_S:
                writes.popleft()
            if not writes:
                del self._writes[key]
        for key, tokens in list(self._started.items()):
            tokens.intersection_update(stored)
            if not tokens:
                del self._started[key]
