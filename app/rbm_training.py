"""The user's own RBM: upload binary data, train on it in the background, keep the model.

The data are an ``.npy`` of 0/1 rows (or images) or a ``.zip`` of images, read by
``lsbcore.rbm.data.load_binary_data`` (its caps and its sentences). Training
(``lsbcore.rbm.train.train``, persistent contrastive divergence) runs on a thread of its own so
the page stays live: a progress bar redraws twice a second, a Stop button ends it after the
current update, and ``MAX_SECONDS`` bounds it. The trained model lives in this session only;
it then runs like the shipped ones.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field

import streamlit as st

from app.page_state import ensure_in_range
from app.text import grid_size, plain

log = logging.getLogger(__name__)

KEY = "_own_rbm"  # the session's Training job (below)
MAX_SECONDS = 120.0  # a session's training is stopped after this long
MAX_HIDDEN = 200
MAX_EPOCHS = 500
DATA_TYPES = ["npy", "zip"]


@dataclass
class Job:
    """One training of the session: its data, progress, and result."""

    data_id: str
    rows: object  # [N, n] uint8 of 0/1
    shape: tuple[int, int] | None
    hidden: int
    epochs: int
    fraction: float = 0.0
    message: str = "starting"
    stop: bool = False
    model: object = None  # the trained RBM once done
    stopped: str | None = None  # why training ended early
    error: str | None = None
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    @property
    def model_id(self) -> str:
        return f"own:{self.data_id}:{self.hidden}:{self.epochs}"


def _train(job: Job) -> None:
    from lsbcore.rbm.train import train

    def progress(fraction: float, message: str) -> bool:
        job.fraction, job.message = float(fraction), str(message)
        return not job.stop

    try:
        result = train(
            job.rows,
            job.hidden,
            epochs=job.epochs,
            seed=0,
            max_seconds=MAX_SECONDS,
            progress=progress,
            shape=job.shape,
        )
        job.model, job.stopped = result.model, result.stopped
    except ValueError as err:
        job.error = str(err)
    except Exception as err:  # a failed training is a sentence, never a traceback
        log.exception("training the user's RBM failed")
        job.error = f"training failed ({type(err).__name__})."


def start(rows, shape, data_id: str, hidden: int, epochs: int) -> Job:
    """Start training on a thread; the job reports its progress as it goes."""
    job = Job(data_id, rows, shape, hidden, epochs)
    job.thread = threading.Thread(target=_train, args=(job,), name="rbm-training", daemon=True)
    job.thread.start()
    return job


@st.cache_data(max_entries=4, show_spinner=False)
def _read(data: bytes, name: str):
    from lsbcore.rbm.data import load_binary_data

    try:
        rows, shape = load_binary_data(data, name)
    except ValueError as err:
        return None, None, str(err)
    return rows, shape, None


def _on_train() -> None:
    state = st.session_state
    upload = state.get("rbm_upload")
    if upload is None:
        return
    rows, shape, error = _read(upload.getvalue(), upload.name)
    if error:
        return
    old = state.get(KEY)
    if old is not None and old.running:
        return
    data_id = hashlib.sha1(upload.getvalue()).hexdigest()[:12]
    state[KEY] = start(rows, shape, data_id, int(state["rbm_hidden"]), int(state["rbm_epochs"]))


def _on_stop() -> None:
    job = st.session_state.get(KEY)
    if job is not None:
        job.stop = True


@st.fragment(run_every=0.5)
def _progress() -> None:
    job = st.session_state.get(KEY)
    if job is None:
        return
    if job.running:
        st.progress(min(1.0, job.fraction), text=f"Training: {plain(job.message)}")
        st.button("Stop training", key="rbm_stop", on_click=_on_stop)
        st.session_state["_rbm_training_live"] = True
    elif st.session_state.pop("_rbm_training_live", False):
        st.rerun(scope="app")  # done: the page takes the model


def sidebar(sb) -> tuple[object, str] | None:
    """The upload and training controls; the trained model and its id once there is one."""
    from lsbcore.rbm.data import MAX_FILE_BYTES, MAX_ROWS, MAX_VISIBLE

    state = st.session_state
    with sb:
        st.file_uploader(
            "Your binary data (.npy or .zip)",
            type=DATA_TYPES,
            key="rbm_upload",
            help="An .npy array of 0/1 rows (2-D) or images (3-D), or a .zip of images of one "
            "size (binarised as the photo pipeline does: ink against paper). Up to "
            f"{MAX_FILE_BYTES // 10**6} MB, {MAX_ROWS:,} rows and {MAX_VISIBLE:,} values a "
            "row.",
        )
        upload = state.get("rbm_upload")
        job = state.get(KEY)
        error = None
        if upload is not None:
            rows, shape, error = _read(upload.getvalue(), upload.name)
            if error:
                st.error(f"This file cannot be trained on: {plain(error)}")
            else:
                layout = f", images {grid_size(*shape)}" if shape else ""
                st.caption(f"{rows.shape[0]:,} rows of {rows.shape[1]:,} values{layout}.")
        ensure_in_range("rbm_hidden", 64, 1, MAX_HIDDEN)
        ensure_in_range("rbm_epochs", 50, 1, MAX_EPOCHS)
        st.number_input("Hidden units", 1, MAX_HIDDEN, step=8, key="rbm_hidden")
        st.number_input("Training epochs", 1, MAX_EPOCHS, step=10, key="rbm_epochs")
        st.button(
            "Train",
            key="rbm_train",
            on_click=_on_train,
            disabled=upload is None or error is not None or (job is not None and job.running),
            help=f"Persistent contrastive divergence, seeded; stopped after {MAX_SECONDS:.0f} s "
            "at most. The model stays in this session.",
        )
        _progress()
        if job is None:
            st.info("Upload data and press Train: the model then runs like the shipped ones.")
            return None
        if job.error:
            st.error(f"Training failed: {plain(job.error)}")
        if job.running or job.model is None:
            return None
        ended = f" (stopped early: {plain(job.stopped)})" if job.stopped else ""
        st.caption(
            f"Trained: {job.model.n_visible} visible, {job.model.n_hidden} hidden units{ended}."
        )
        return job.model, job.model_id
