"""The on-disk pin store without a browser: tokens, links, saving, renaming and deleting, each pin
set's quota, the store's own bounds (a full store refuses; no pin set ever loses a pin to
another), expiry by age and the sentence that says so, owner-only permissions, a root that is
not the server's own refused, and writes that fail leaving nothing behind."""

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
from app import pin_store, pins
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


def test_fresh_pin_sets_cannot_remove_another_sets_pins_and_a_full_store_refuses(
    root, pin, monkeypatch
):
    """The red team's attack: sessions with fresh tokens pin until the store is full. The
    victim's pins, older than all of theirs, stay; the newcomers are refused in a sentence."""
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
    assert "full" in refusals[0] and "24 hours" in refusals[0] and "JSON" in refusals[0]
    assert sum(p.stat().st_size for p in files_under(root)) <= 20 * size


def test_the_number_of_pin_sets_is_bounded_and_a_new_set_is_refused_not_made_room_for(
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
