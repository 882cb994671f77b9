"""The on-disk pin store without a browser: tokens, links, saving, renaming and deleting, each pin
set's quota, each visitor's share (a rate and a quota per tab and per address), the store's own
bounds (the longest-unused sets make room for a newcomer; a set in use is never removed; a store
whose sets are all in use refuses, saying when), expiry by age and the sentence that says so,
owner-only permissions, a root that is not the server's own refused, and writes that fail leaving
nothing behind. The clock is passed in (``now``): no test sleeps."""

from __future__ import annotations

import os
import resource
import signal
import stat
import time
from dataclasses import replace

import pytest
import torch

import lsbcore
from app import config as cfgmod
from app import pin_allowance, pin_store, pins
from app.pin_allowance import Visitor
from app.pin_store import PinStore
from app.pins import PinError
from lsbcore.balancing.functions import MixtureBalancing

TOKEN = "0123456789abcdef0123456789abcdef"
DAY_AGO = time.time() - pin_store.MAX_AGE_S - 60


@pytest.fixture(scope="module")
def pin() -> pins.Pin:
    """A small pin of paper case 1 (no run needed): its six samplers' summaries, nothing
    measured yet (no learned function: checking one costs more than the rest together)."""
    cfg = cfgmod.defaults_for("paper", 1)
    return pins.Pin(
        name="case 1",
        created=1.7e9,
        problem="case 1",
        config=cfg,
        steps=0,
        phase="burnin",
        shared=True,
        max_lag=None,
        samplers={n: dict.fromkeys(pins.SUMMARY_FIELDS) for n in cfg.samplers},
    )


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(pin_store, "ROOT", tmp_path)
    monkeypatch.setattr(pin_store, "SWEEP_EVERY_S", 0.0)  # every access sweeps
    return tmp_path


def size_of(pin: pins.Pin) -> int:
    return len(pin.to_json().encode("utf-8"))


def age(path, when: float = DAY_AGO) -> None:
    os.utime(path, (when, when))


def files_under(root) -> list:
    return [p for p in root.rglob("*") if p.is_file()]


# ----------------------------------------------------------------------------- links and pins
def test_tokens_are_exactly_32_lowercase_hex_digits():
    assert pin_store.valid_token(pin_store.new_token())
    assert pin_store.new_token() != pin_store.new_token()
    for bad in ("", TOKEN[:-1], TOKEN + "0", TOKEN.upper(), "../" + TOKEN[3:], "0" * 31 + "/",
                f"{TOKEN}\n", None, 123, ["a"]):  # fmt: skip
        assert not pin_store.valid_token(bad)
        with pytest.raises(ValueError):
            PinStore(bad)


def test_a_link_token_opens_its_set_and_says_so_when_it_cannot(root, pin):
    assert pin_store.open_link(None, root) == (None, None)  # a fresh page: nothing to say
    store, why = pin_store.open_link("../../etc/passwd", root)
    assert store is None and "not a pin-set token" in why
    assert not (root / "etc").exists()
    store, why = pin_store.open_link(TOKEN, root)
    assert store is None and "No pinned runs are stored under this link" in why
    PinStore(TOKEN, root).save(pin)
    store, why = pin_store.open_link([TOKEN], root)
    assert why is None and [e.pin for e in store.entries()] == [pin]
    assert pin_store.query_params({pin_store.STATE_KEY: store}) == {"pins": TOKEN}
    assert pin_store.query_params({}) == {}


def test_pins_are_saved_renamed_and_deleted_and_ids_never_leave_the_set(root, pin):
    store = PinStore(TOKEN, root)
    first = store.save(pin)
    second = store.save(pins.from_json(pin.to_json()).renamed("second"))
    assert [e.pin.name for e in store.entries()] == ["case 1", "second"]
    store.rename(first, "  renamed\n")
    assert store.get(first).name == "renamed" and store.get(first).samplers == pin.samplers
    with pytest.raises(PinError):
        store.rename(first, "x" * 100)
    store.rename(first, "right\u202eto\u200bleft\x07")  # invisible and control characters
    assert store.get(first).name == "righttoleft"
    store.delete(second)
    assert [e.pin_id for e in store.entries()] == [first]
    for bad in ("../x", f"../{TOKEN}/{first}", first.upper(), ""):
        with pytest.raises(KeyError):
            store.delete(bad)
    store.delete(first)  # the last pin: the set's directory goes with it
    assert not store.exists() and store.entries() == []


def test_gaps_in_a_curve_read_back_and_an_unreadable_pin_is_refused_before_it_is_kept(root, pin):
    store = PinStore(TOKEN, root)
    gaps = replace(pin, acf={"max": [1.0, None, 0.5]})
    assert store.get(store.save(gaps)).acf["max"] == [1.0, None, 0.5]
    learned = {"lsb1": lsbcore.balancing_to_dict(MixtureBalancing(torch.zeros(4)))}
    assert store.get(store.save(replace(pin, learned=learned))).learned == learned
    learned["lsb1"]["parameters"]["theta"] = [2e4, 0.0, 0.0, 0.0]  # a learner that diverged
    with pytest.raises(PinError, match="learned function of lsb1"):
        store.save(replace(pin, learned=learned))
    assert len(store.entries()) == 2


def test_a_corrupt_file_in_the_store_is_skipped_not_fatal(root, pin):
    store = PinStore(TOKEN, root)
    good = store.save(pin)
    (store.dir / "0123456789abcdef.json").write_text("{broken", encoding="utf-8")
    (store.dir / "notes.txt").write_text("ignored", encoding="utf-8")
    assert [e.pin_id for e in store.entries()] == [good]


# ----------------------------------------------------------------------------- quotas
def test_a_set_keeps_at_most_eight_pins_each_under_its_byte_cap(root, pin, monkeypatch):
    store = PinStore(TOKEN, root)
    for k in range(pin_store.MAX_PINS):
        store.save(pin.renamed(f"pin {k}"))
    with pytest.raises(PinError, match="at most 8"):
        store.save(pin)
    assert len(store.entries()) == pin_store.MAX_PINS
    monkeypatch.setattr(pins, "MAX_BYTES", 1000)
    with pytest.raises(PinError, match="exceed"):
        PinStore("f" * 32, root).save(pin)
    assert not any((root / ("f" * 32)).glob("*.json"))


def test_a_set_has_a_byte_budget_that_only_its_own_pins_spend(root, pin, monkeypatch):
    size = size_of(pin)
    monkeypatch.setattr(pin_store, "MAX_SET_BYTES", 2 * size + size // 2)
    store, other = PinStore(TOKEN, root), PinStore("a" * 32, root)
    first = store.save(pin)
    store.save(pin)
    with pytest.raises(PinError) as err:
        store.save(pin)
    assert "delete one" in str(err.value) and str(err.value).endswith(".")
    store.rename(first, "a new name")  # the same pin rewritten still fits
    assert len(store.entries()) == 2
    assert len([other.save(pin), other.save(pin)]) == 2  # another set has a budget of its own


def test_fresh_pin_sets_cannot_remove_a_set_in_use_and_a_full_store_refuses(root, pin, monkeypatch):
    """Sessions with fresh tokens (no visitor's limits: the store's own caps alone) pin until
    the store is full. The victim's pins, older than all of theirs, stay while its set is in
    use; the newcomers are refused in a sentence that says when to try again."""
    size = size_of(pin)
    monkeypatch.setattr(pin_store, "MAX_STORE_BYTES", 20 * size)
    victim = PinStore(TOKEN, root)
    kept = [victim.save(pin) for _ in range(3)]
    for k, pin_id in enumerate(kept):  # written 23 hours ago: the oldest in the store
        age(victim.dir / f"{pin_id}.json", time.time() - 23 * 3600 + k)
    refusals = []
    for _ in range(12):  # twelve fresh sessions, eight pins each
        attacker = PinStore(pin_store.new_token(), root)
        for _ in range(pin_store.MAX_PINS):
            try:
                attacker.save(pin)
            except PinError as err:
                refusals.append(str(err))
    assert [e.pin_id for e in victim.entries()] == kept
    assert refusals and all(r == refusals[0] for r in refusals)
    assert "full" in refusals[0] and "pin again in" in refusals[0] and "JSON" in refusals[0]
    assert sum(p.stat().st_size for p in files_under(root)) <= 20 * size


def test_the_number_of_pin_sets_is_bounded_and_a_new_set_is_refused_while_all_are_in_use(
    root, pin, monkeypatch
):
    monkeypatch.setattr(pin_store, "MAX_SETS", 3)
    stores = [PinStore(f"{k:032x}", root) for k in range(3)]
    for k, store in enumerate(stores):
        store.save(pin)
        age(store.dir, time.time() - 100 + k)
    with pytest.raises(PinError, match="full"):
        PinStore("e" * 32, root).save(pin)
    assert not (root / ("e" * 32)).exists()  # a refused set leaves no directory behind
    assert all(len(s.entries()) == 1 for s in stores)
    stores[0].save(pin)  # a set that exists may still grow within its own quota
    assert len(stores[0].entries()) == 2


# ----------------------------------------------------------------------------- fair shares
T0 = time.time()  # the tests' clock starts now, so that no pin is a day old by accident
HOUR = 3600.0


def sentence(err) -> str:
    text = str(err.value)
    assert text.endswith(".") and text.count(". ") == 0 and "Traceback" not in text
    return text


def test_one_visitor_opening_fresh_sessions_gets_a_share_and_a_newcomer_still_pins(root, pin):
    """The red team's attack: 255 fresh sessions (a token each) from one address in 0.7 s,
    one pin each. The address keeps its quota of sets, each refusal says why and when, and a
    visitor from elsewhere still pins; the store holds the attacker's share, not everything."""
    limit = pin_allowance.LIMITS["network address"]
    refusals = []
    for k in range(255):
        attacker = Visitor(f"tab {k}", "203.0.113.7")
        try:
            PinStore(pin_store.new_token(), root).save(
                pin, now=T0 + k * 0.7 / 255, visitor=attacker
            )
        except PinError as err:
            refusals.append(str(err))
    assert len(refusals) == 255 - limit.sets
    assert len(list(root.iterdir())) == limit.sets < pin_store.MAX_SETS // 8
    assert refusals[0].startswith(f"this network address already keeps {limit.sets} pin sets")
    assert "start another in 24 hours, when the first of them expires." in refusals[0]
    newcomer = PinStore(pin_store.new_token(), root)
    newcomer.save(pin, now=T0 + 1, visitor=Visitor("a newcomer", "198.51.100.2"))
    assert len(newcomer.entries()) == 1


def writes(store: PinStore, pin, visitor: Visitor, count: int, now: float) -> str:
    """``count`` writes by ``visitor`` at ``now``: a pin into ``store``, then renames of it."""
    pin_id = store.save(pin, now=now, visitor=visitor)
    for k in range(1, count):
        store.rename(pin_id, f"name {k}", visitor, now=now)
    return pin_id


def test_writes_are_rate_limited_per_tab_and_per_address(root, pin):
    """A tab writes at most 10 pins a minute (pinned, renamed or uploaded), an address 30;
    another tab or address is not slowed by them, and the tab may write again once the
    minute has passed."""
    tab_rate = pin_allowance.LIMITS["browser tab"].writes
    address_rate = pin_allowance.LIMITS["network address"].writes
    busy = Visitor("busy tab", "203.0.113.7")
    store = PinStore(TOKEN, root)
    pin_id = writes(store, pin, busy, tab_rate, T0)
    with pytest.raises(PinError) as err:
        store.rename(pin_id, "one too many", busy, now=T0 + 30)
    assert sentence(err) == (
        f"this browser tab has pinned, renamed or uploaded {tab_rate} pins in the last minute, "
        "the most one browser tab may, so you can pin again in 30 seconds."
    )
    assert store.get(pin_id).name == f"name {tab_rate - 1}"  # the refused write left nothing
    store.save(pin, now=T0 + 30, visitor=Visitor("another tab", "203.0.113.7"))
    store.rename(pin_id, "a minute later", busy, now=T0 + 60.5)
    # three tabs of one address, ten minutes on: thirty writes a minute between them
    later = T0 + 600
    for k in range(address_rate // tab_rate):
        writes(PinStore(f"{k + 1:032x}", root), pin, Visitor(f"tab {k}", "2001:db8::1"), 10, later)
    with pytest.raises(PinError) as err:  # the same /64: the same address
        PinStore("e" * 32, root).save(pin, now=later + 1, visitor=Visitor("4", "2001:db8::2"))
    assert sentence(err).startswith(
        f"this network address has pinned, renamed or uploaded {address_rate} pins in the last "
        "minute, the most one network address may, so you can pin again in 59 seconds"
    )
    PinStore("f" * 32, root).save(pin, now=later + 1, visitor=Visitor("4", "2001:db8:1::2"))


def test_pin_sets_are_a_quota_per_tab_and_per_address_freed_as_sets_go(root, pin, monkeypatch):
    """A tab starts one set (pinning into a set opened from a link starts none); an address
    keeps at most 16 sets and 16 MB in them; deleting a set's pins frees its place."""
    tab = Visitor("tab", "203.0.113.7")
    PinStore(TOKEN, root).save(pin, now=T0, visitor=tab)
    with pytest.raises(PinError) as err:
        PinStore("a" * 32, root).save(pin, now=T0 + 1, visitor=tab)
    assert sentence(err) == (
        "this browser tab already keeps a pin set on the server, the most one browser tab may, "
        "so pin into one from its link, or start another in 24 hours, when the first of them "
        "expires."
    )
    PinStore("b" * 32, root).save(pin, now=T0 + 2, visitor=Visitor("other", "198.51.100.2"))
    PinStore("b" * 32, root).save(pin, now=T0 + 3, visitor=tab)  # someone's link: allowed
    # an address: sixteen sets from sixteen tabs, then none until one of them is gone
    sets = pin_allowance.LIMITS["network address"].sets
    stores = [PinStore(f"{k + 1:032x}", root) for k in range(sets)]
    for k, store in enumerate(stores):
        store.save(pin, now=T0 + 10 * k, visitor=Visitor(f"tab {k}", "192.0.2.1"))
    newcomer = PinStore("c" * 32, root)
    with pytest.raises(PinError) as err:
        newcomer.save(pin, now=T0 + 2 * HOUR, visitor=Visitor("one more", "192.0.2.1"))
    assert sentence(err).startswith(f"this network address already keeps {sets} pin sets")
    assert "start another in 22 hours" in str(err.value)  # the first was written at T0
    (pin_id,) = [e.pin_id for e in stores[3].entries()]
    stores[3].delete(pin_id)
    newcomer.save(pin, now=T0 + 2 * HOUR, visitor=Visitor("one more", "192.0.2.1"))
    # bytes: an address's sets hold at most its share together
    size = size_of(pin)
    monkeypatch.setitem(
        pin_allowance.LIMITS, "network address", pin_allowance.Limit(30, 16, 2 * size + size // 2)
    )
    mine = PinStore("d" * 32, root)
    mine.save(pin, now=T0 + 3 * HOUR, visitor=Visitor("x", "192.0.2.9"))
    mine.save(pin, now=T0 + 3 * HOUR, visitor=Visitor("x", "192.0.2.9"))
    with pytest.raises(PinError) as err:
        PinStore("e" * 32, root).save(pin, now=T0 + 3 * HOUR, visitor=Visitor("y", "192.0.2.9"))
    assert sentence(err).startswith("the pin sets this network address started hold")


def open_sets(root, count: int, pin, start: float) -> list[PinStore]:
    """``count`` sets of one pin each, the k-th written (and so used) at ``start + k``."""
    stores = [PinStore(f"{k + 1:032x}", root) for k in range(count)]
    for k, store in enumerate(stores):
        store.save(pin, now=start + k)
    return stores


@pytest.mark.parametrize("cap", ["sets", "bytes"])
def test_the_longest_unused_sets_make_room_before_a_newcomer_is_refused(
    root, pin, monkeypatch, cap
):
    """A full store removes the sets unused for over an hour, the longest unused first, and
    only as many as the newcomer needs; a set used within the hour stays, and once every set
    is in use the newcomer is refused in a sentence that says when one falls idle."""
    if cap == "sets":
        monkeypatch.setattr(pin_store, "MAX_SETS", 3)
    else:
        monkeypatch.setattr(pin_store, "MAX_STORE_BYTES", 3 * size_of(pin) + 10)
    oldest, in_use, older = open_sets(root, 3, pin, T0)
    in_use.entries(now=T0 + 1.5 * HOUR)  # its page listed its pins half an hour ago
    now = T0 + 2 * HOUR
    first = PinStore("a" * 32, root)
    first.save(pin, now=now)
    assert not oldest.exists() and in_use.exists() and older.exists()
    PinStore("b" * 32, root).save(pin, now=now + 1)
    assert not older.exists() and len(in_use.entries(now=now + 1)) == 1
    with pytest.raises(pin_store.StoreFull) as err:
        PinStore("c" * 32, root).save(pin, now=now + 1)
    assert sentence(err).startswith(
        "the server's pin store is full and every pin set in it was used within the last hour, "
        "so you can pin again in 60 minutes;"  # the first newcomer's set, used at now, idles first
    )
    assert not (root / ("c" * 32)).exists() and first.exists()
    assert len(list(root.iterdir())) == 3


USES = {
    "a page run": lambda store, pin, now: store.touch(now),
    "its link opened": lambda store, pin, now: pin_store.open_link(store.token, store.root, now),
    "its pins listed": lambda store, pin, now: store.entries(now),
    "a pin renamed": lambda store, pin, now: store.rename(
        store.entries(now)[0].pin_id, "x", now=now
    ),
    "a pin added": lambda store, pin, now: store.save(pin, now=now),
    "the sweep": lambda store, pin, now: pin_store.sweep(store.root, now, force=True),
}


@pytest.mark.parametrize("use", USES)
def test_a_set_used_within_the_hour_is_never_removed_and_a_sweep_is_not_a_use(
    root, pin, monkeypatch, use
):
    """Opening a set's link, a page run that holds it, listing, renaming or adding a pin are
    uses: the set stays for the hour after, however old its pins. The sweep that expires a day
    old pin is not a use: it leaves the set as unused as it was."""
    monkeypatch.setattr(pin_store, "MAX_SETS", 2)
    used, other = open_sets(root, 2, pin, T0)
    stale = used.dir / "0123456789abcdef.json"  # a pin written a day ago: the sweep takes it
    stale.write_text(pin.to_json(), encoding="utf-8")
    age(stale, T0 - pin_store.MAX_AGE_S - 60)
    os.utime(used.dir, (T0, T0))
    USES[use](used, pin, T0 + 0.9 * HOUR)
    PinStore("a" * 32, root).save(pin, now=T0 + 1.5 * HOUR)  # room for one: the longest unused
    if use == "the sweep":
        assert not stale.exists() and not used.exists() and other.exists()
    else:
        assert used.exists() and not other.exists()
        assert used.entries(now=T0 + 1.5 * HOUR)


# ----------------------------------------------------------------------------- expiry
def test_pins_expire_only_by_age_and_the_set_says_how_many_did(root, pin):
    store = PinStore(TOKEN, root)
    stale = [store.save(pin) for _ in range(3)]
    fresh = store.save(pin)
    assert pin_store.expired_notice(store) is None
    for pin_id in stale:
        age(store.dir / f"{pin_id}.json")
    assert [e.pin_id for e in store.entries()] == [fresh]
    assert not any((store.dir / f"{p}.json").exists() for p in stale)
    assert pin_store.expired_notice(store) == (
        "Your 3 pins expired: pins are kept 24 hours after they were last written."
    )
    # another set's, removed by the sweep on opening any link: its link still says why
    other = PinStore("b" * 32, root)
    gone = other.save(pin)
    age(other.dir / f"{gone}.json")
    pin_store.open_link(TOKEN, root)
    store_b, why = pin_store.open_link("b" * 32, root)
    assert why is None and store_b.entries() == []
    assert pin_store.expired_notice(store_b) == (
        "Your pin expired: pins are kept 24 hours after they were last written."
    )
    # a day after its last pin expired, an empty set's directory goes; a fresh one's stays
    for path in other.dir.iterdir():
        age(path)
    age(other.dir)
    empty_fresh = PinStore("c" * 32, root)
    empty_fresh.save(pin)
    pin_store.sweep(root, force=True)
    assert not other.dir.exists() and empty_fresh.dir.exists()
    assert [e.pin_id for e in store.entries()] == [fresh]


# ----------------------------------------------------------------------------- permissions
def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_store_is_made_owner_only(tmp_path, pin, monkeypatch):
    root = tmp_path / "pins"
    monkeypatch.setattr(pin_store, "ROOT", root)
    store = PinStore(TOKEN)
    pin_id = store.save(pin)
    assert mode(root) == 0o700 and mode(store.dir) == 0o700
    assert mode(store.dir / f"{pin_id}.json") == 0o600
    age(store.dir / f"{pin_id}.json")
    store.entries()
    assert [mode(p) for p in files_under(root)] == [0o600]  # the expiry count, too


def symlinked(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    (tmp_path / "pins").symlink_to(real)
    return real


def group_readable(tmp_path):
    (tmp_path / "pins").mkdir(mode=0o700)
    os.chmod(tmp_path / "pins", 0o755)
    return tmp_path / "pins"


def foreign(tmp_path, monkeypatch):
    (tmp_path / "pins").mkdir(mode=0o700)
    monkeypatch.setattr(pin_store, "server_uid", lambda: os.getuid() + 1)
    return tmp_path / "pins"


def a_file(tmp_path):
    (tmp_path / "pins").write_text("not a folder", encoding="utf-8")
    return tmp_path


ROOTS = {"a symlink": symlinked, "group-readable": group_readable, "a file": a_file}


@pytest.mark.parametrize("case", [*ROOTS, "owned by another user"])
def test_a_root_that_is_not_the_servers_own_folder_switches_pins_off(
    tmp_path, pin, monkeypatch, case
):
    target = foreign(tmp_path, monkeypatch) if case not in ROOTS else ROOTS[case](tmp_path)
    root = tmp_path / "pins"
    planted = target / TOKEN
    if target.is_dir():  # a pin set someone else placed there: never read, never written to
        planted.mkdir(mode=0o700)
        (planted / "0123456789abcdef.json").write_text(pin.to_json(), encoding="utf-8")
    before = sorted(files_under(tmp_path))
    problem = pin_store.root_problem(root)
    assert problem and problem.endswith(".") and "switched off" in problem
    with pytest.raises(PinError, match="switched off"):
        PinStore(TOKEN, root).save(pin)
    assert PinStore(TOKEN, root).entries() == []
    store, why = pin_store.open_link(TOKEN, root)
    assert store is None and "switched off" in why
    assert sorted(files_under(tmp_path)) == before


def test_a_set_directory_that_is_a_symlink_is_not_followed(root, pin, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "0123456789abcdef.json").write_text(pin.to_json(), encoding="utf-8")
    (root / TOKEN).symlink_to(elsewhere, target_is_directory=True)
    store = PinStore(TOKEN, root)
    assert store.entries() == []
    with pytest.raises(PinError):
        store.save(pin)
    assert [p.name for p in elsewhere.iterdir()] == ["0123456789abcdef.json"]


# ----------------------------------------------------------------------------- partial writes
def test_a_write_the_disk_refuses_leaves_no_partial_file(root, pin):
    """The file system refuses to grow the file past half the pin (as a full disk would): the
    write fails in a sentence and its .tmp is gone at once."""
    store = PinStore(TOKEN, root)
    store.save(pin)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the error, not the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (size_of(pin) // 2, limits[1]))
    try:
        with pytest.raises(PinError) as err:
            store.save(pin)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert "could not write" in str(err.value) and str(err.value).endswith(".")
    assert sorted(p.suffix for p in store.dir.iterdir()) == [".json"]


def test_partial_files_count_against_the_budgets_and_stale_ones_are_swept(root, pin, monkeypatch):
    size = size_of(pin)
    monkeypatch.setattr(pin_store, "MAX_STORE_BYTES", 3 * size)
    store = PinStore(TOKEN, root)
    store.save(pin)
    partial = store.dir / "0123456789abcdef.1234abcd.tmp"  # a write in progress, or crashed
    partial.write_bytes(b"x" * (size + size // 2))
    with pytest.raises(PinError, match="full"):
        PinStore("d" * 32, root).save(pin)
    age(partial, time.time() - 2 * pin_store.TMP_AGE_S)
    PinStore("d" * 32, root).save(pin)  # the sweep removed the crashed write's leftover
    assert not partial.exists()
