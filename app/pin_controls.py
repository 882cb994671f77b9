"""The page's pin controls: the session's pin set (opened from the link), "Pin this run" next to
the Run / Pause / Step / Reset buttons, and managing pins (rename, delete, download, upload).

The pin set is created on the first pin, and its token then goes into the link as ``pins=…``
(``pin_store.query_params``), so a reload finds it. Pin names are user text: they appear only as
plain text (``app.text``), never as Markdown. A pin the store cannot keep (full, or switched off)
is offered as a JSON download beside the sentence that says why, so that nothing is lost.

Every write names its visitor (``visitor``): this session's own random id and the address
Streamlit saw (``st.context.ip_address``), for the store's per-visitor limits
(``app.pin_allowance``). Every full run of the page marks the session's set as in use
(``link_params``), so the store never removes it while the page is open and running.
"""

from __future__ import annotations

import logging
import secrets

import streamlit as st

from app import network_targets, pin_store, pins
from app.pin_allowance import Visitor
from app.pin_store import PinStore
from app.pins import PinError
from app.target_kind import TargetKind, kind_of
from app.text import escape, plain, quote
from lsbcore.studies.figures import sampler_label

log = logging.getLogger(__name__)

OPENED_KEY = "_pins_opened"  # the link's pin set was looked up in this session
NOTICE_KEY = "_pin_notice"  # why the link's pins could not be loaded, until the next pin
PINNED_KEY = "_pinned"  # (ok, sentence): what the Pin button did, said once
REFUSED_KEY = "_pin_refused"  # the JSON of a pin the store could not keep, offered once
VISITOR_KEY = "_pin_visitor"  # this session's id for the store's per-visitor limits


def link_params() -> dict[str, str]:
    """The link parameter of this session's pin set, for the page to merge into the URL it
    writes. Call it before the page rewrites st.query_params (``streamlit_app.main``): on a
    session's first run it opens the pin set the link names; on every run it marks the set as
    in use."""
    store = session_store()
    if store is not None:
        store.touch()
    return pin_store.query_params(st.session_state)


def visitor() -> Visitor:
    """Who writes: this session (an id of its own) at the address Streamlit saw, which is
    the TCP peer's unless a proxy in uvicorn's FORWARDED_ALLOW_IPS sent X-Forwarded-For."""
    tab = st.session_state.setdefault(VISITOR_KEY, secrets.token_hex(8))
    return Visitor(tab, st.context.ip_address)


def session_store() -> PinStore | None:
    """This session's pin set: the link's (opened on the session's first run), or the one its
    first pin made; None before that."""
    state = st.session_state
    if not state.get(OPENED_KEY):
        state[OPENED_KEY] = True
        store, notice = pin_store.open_link(st.query_params.get_all(pin_store.PARAM) or None)
        if store is not None:
            state[pin_store.STATE_KEY] = store
        problem = None if notice else pin_store.root_problem()
        if notice or problem:
            state[NOTICE_KEY] = notice or f"Runs cannot be pinned: {problem}"
    return state.get(pin_store.STATE_KEY)


def _keep(pin: pins.Pin) -> None:
    """Save ``pin`` in this session's set; a new set joins the session (and so the link) once
    it holds a pin, so that a link never names a set that was refused."""
    store = session_store() or PinStore(pin_store.new_token())
    store.save(pin, visitor=visitor())
    st.session_state[pin_store.STATE_KEY] = store
    st.session_state.pop(NOTICE_KEY, None)


def publish() -> None:
    """Put a pin set made in this run (by the Pin button) into the link at once."""
    for key, value in pin_store.query_params(st.session_state).items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


def pins_view(target: str) -> str:
    """The tab where a page draws its pins: Compare on the Ising page, Pinned runs elsewhere."""
    return "Compare" if kind_of(target) is TargetKind.ISING else "Pinned runs"


def default_name(run) -> str:
    cfg = run.config
    kind = kind_of(cfg.target)
    if kind is not TargetKind.ISING:
        name = run.problem.name[:24]
        if cfg.target in network_targets.PRESETS:  # MN 1 / MN 2: ε is what a user varies
            name = f"{name} · ε {cfg.epsilon:g}"
        return f"{name} · {cfg.chains} chains · seed {cfg.seed} · step {run.n_steps:,}"
    source = {"paper": f"case {cfg.case}", "sample": cfg.sample}.get(cfg.source, "upload")
    return f"{source[:24]} · λ {cfg.lam:g} · seed {cfg.seed} · step {run.n_steps:,}"


def _pin(run) -> None:
    name = st.session_state.get("pin_name", "").strip() or default_name(run)
    try:
        pin = pins.capture(run, name)
    except PinError as err:
        st.session_state[PINNED_KEY] = (False, f"This run cannot be pinned: {plain(err)}")
        return
    try:
        _keep(pin)
    except PinError as err:
        st.session_state[PINNED_KEY] = (False, f"This run cannot be pinned: {plain(err)}")
        st.session_state[REFUSED_KEY] = pin.to_json()
        return
    except OSError as err:  # the server's disk: full, or not writable
        log.exception("pin not saved")
        st.session_state[PINNED_KEY] = (
            False,
            f"This run cannot be pinned: the server could not write it ({type(err).__name__}).",
        )
        return
    st.session_state["pin_name"] = ""
    st.session_state[PINNED_KEY] = (
        True,
        f"Pinned {quote(pin.name)}: see the {pins_view(run.config.target)} tab.",
    )


def pin_button(run) -> None:
    """ "Pin this run": a name (a suggestion when left empty), kept in this session's set."""
    session_store()
    with st.popover(
        "Pin this run",
        help="Keep this run's settings, summary numbers and figures under a name, to compare "
        f"it with other runs in the {pins_view(run.config.target)} tab.",
    ):
        st.text_input(
            "Name",
            key="pin_name",
            max_chars=pins.NAME_CHARS,
            placeholder=default_name(run),
            help="Left empty, the suggestion shown is used.",
        )
        st.button("Pin", key="pin_save", type="primary", on_click=_pin, args=(run,))


def notices() -> None:
    """What the last pin did, and why the link's pins could not be loaded."""
    pinned = st.session_state.pop(PINNED_KEY, None)
    if pinned is not None:
        ok, message = pinned
        (st.success if ok else st.error)(message)
    refused = st.session_state.pop(REFUSED_KEY, None)
    if refused is not None:
        st.download_button(
            "Download this pin (JSON)",
            data=refused,
            file_name="lsb-pin.json",
            mime="application/json",
            on_click="ignore",
            key="pin_refused_download",
            help="Add it later under Compare, from its file.",
        )
    notice = st.session_state.get(NOTICE_KEY)
    if notice:
        st.info(notice)


# ----------------------------------------------------------------------------- managing pins
ERROR_KEY = "_pin_error"  # a rename that failed, said on the next draw


def managed() -> None:
    """The pins' expander: add one from its file, rename, download or delete each (every page's
    pins tab has it)."""
    with st.expander("Pinned runs: add from a file, rename, download, delete"):
        upload()
        store = session_store()
        if store is not None:
            manage(store, store.entries())


def pins_of(belongs) -> tuple[dict[str, pins.Pin], list[str]]:
    """This session's pins that ``belongs(pin)`` keeps, by their numbered label ("2. name", the
    number the pin's place in the whole set), and the names of the others."""
    store = session_store()
    entries = store.entries() if store is not None else []
    kept = {f"{k}. {e.pin.name}": e.pin for k, e in enumerate(entries, start=1) if belongs(e.pin)}
    return kept, [e.pin.name for e in entries if not belongs(e.pin)]


def others_caption(names: list[str], what: str = "targets") -> None:
    """Name the pins a page's tab leaves to their own page (plain text: names are user text)."""
    if names:
        st.caption(
            f"Pins of other {what}, compared on their own page: "
            + ", ".join(escape(n) for n in names)
            + "."
        )


def expired_notice() -> None:
    """Why this session's pins are gone, when they expired (``pin_store.expired_notice``)."""
    store = session_store()
    notice = pin_store.expired_notice(store) if store is not None else None
    if notice:
        st.info(notice)


def upload() -> None:
    """Add a pin from a downloaded JSON file, checked field by field (``pins.from_json``)."""
    file = st.file_uploader(
        "Add a pinned run from its JSON",
        type=["json"],
        key="pin_upload",
        help=f"A pin downloaded here (at most {pins.MAX_BYTES // 1000:,} kB).",
    )
    if file is None:
        return
    done = st.session_state.setdefault("_pin_uploaded", {})
    if file.file_id not in done:  # once per file: the widget keeps it across reruns
        try:
            pin = pins.from_json(file.getvalue())
            _keep(pin)
            done[file.file_id] = None
        except PinError as err:
            done[file.file_id] = str(err)
        except Exception as err:  # anything else the file provokes is a refusal, not a crash
            log.exception("pin upload failed")
            done[file.file_id] = f"it cannot be read ({type(err).__name__})."
        publish()
        if done[file.file_id] is None:
            st.rerun()  # the figures above the box (a Pinned runs tab's) draw the pin at once
    error = done[file.file_id]
    if error:
        st.error(f"This file cannot be pinned: {plain(error)}")
    else:
        st.caption("Pinned from the file: it is listed below.")


def _rename(store: PinStore, pin_id: str) -> None:
    key = f"pin_rename_{pin_id}"
    try:
        store.rename(pin_id, st.session_state.get(key, ""), visitor())
        st.session_state[key] = ""
    except PinError as err:
        st.session_state[ERROR_KEY] = f"This pin cannot be renamed: {plain(err)}"
    except KeyError:
        st.session_state[ERROR_KEY] = "This pin is gone (deleted, or older than 24 hours)."
    except OSError as err:
        log.exception("pin not renamed")
        st.session_state[ERROR_KEY] = f"This pin cannot be renamed ({type(err).__name__})."


def _delete(store: PinStore, pin_id: str) -> None:
    try:
        store.delete(pin_id)
    except OSError as err:
        log.exception("pin not deleted")
        st.session_state[ERROR_KEY] = f"This pin cannot be deleted ({type(err).__name__})."


def manage(store: PinStore, entries: list) -> None:
    """Rename, delete or download each pin (callbacks: the list below is drawn afterwards)."""
    error = st.session_state.pop(ERROR_KEY, None)
    if error:
        st.error(error)
    for k, entry in enumerate(entries, start=1):
        pin, pin_id = entry.pin, entry.pin_id
        with st.container(border=True):
            st.text(f"{k}. {pin.name}")
            st.caption(
                f"{plain(pin.problem, 80)} · {pin.steps:,} steps · "
                + ", ".join(sampler_label(n) for n in pin.samplers)
            )
            row = st.container(horizontal=True, vertical_alignment="bottom")
            row.text_input(
                "New name",
                key=f"pin_rename_{pin_id}",
                max_chars=pins.NAME_CHARS,
                placeholder=pin.name,
            )
            row.button(
                "Rename", key=f"pin_rename_go_{pin_id}", on_click=_rename, args=(store, pin_id)
            )
            row.download_button(
                "Download (JSON)",
                data=pin.to_json(),
                file_name=f"lsb-pin-{pin_id}.json",
                mime="application/json",
                on_click="ignore",
                key=f"pin_download_{pin_id}",
            )
            row.button("Delete", key=f"pin_delete_{pin_id}", on_click=_delete, args=(store, pin_id))
