"""The user's own RBM: upload binary data, train on it in the background, keep the model.

The data are an ``.npy`` of 0/1 rows (or images) or a ``.zip`` of images, read by
``lsbcore.rbm.data.load_binary_data`` (its caps and its sentences). Training
(``lsbcore.rbm.train.train``, persistent contrastive divergence) runs on a thread of its own so
the page stays live: a progress bar redraws twice a second, a Stop button ends it after the
current update, and ``MAX_SECONDS`` bounds it. The trained model lives in this session only;
it then runs like the shipped ones.

Streamlit drops a widget's value when a rerun does not draw it (another target is shown), and a
file box cannot be given a file back. So the settings are kept in keys of their own and given
back to their boxes (``HIDDEN_KEPT``, ``EPOCHS_KEPT``), and the data last read are kept decoded
(``DATA_KEPT``): they stay in use, and say so, until another file replaces them or the file is
removed from the box.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field

import streamlit as st

from app.page_state import PAGE_RUNS, Slot, ensure_in_range, state_again
from app.text import counted, grid_size, plain, quote
from app.upload_limit import upload_limit_mb

log = logging.getLogger(__name__)

KEY = "_own_rbm"  # the session's Training job (below)
MAX_SECONDS = 120.0  # a session's training is stopped after this long
MAX_HIDDEN = 200
MAX_EPOCHS = 500
DATA_TYPES = ["npy", "zip"]


@dataclass(frozen=True)
class Data:
    """Binary data read from an upload: the file's name, an id of its bytes, its rows."""

    name: str
    data_id: str
    rows: object  # [N, n] uint8 of 0/1
    shape: tuple[int, int] | None


HIDDEN_KEPT = Slot("_rbm_hidden_kept", 64)  # the boxes' values, kept while they are not drawn
EPOCHS_KEPT = Slot("_rbm_epochs_kept", 50)
# the data last read: Data, kept while the file box is not drawn
DATA_KEPT: Slot[Data | None] = Slot("_rbm_data", None)
# the page run that last drew the file box, and whether it showed a file then
BOX_SHOWN: Slot[tuple[int, bool] | None] = Slot("_rbm_box_shown", None)


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


def _data(upload) -> tuple[Data | None, str | None]:
    """The upload read (kept for later reruns), or why it cannot be trained on."""
    rows, shape, error = _read(upload.getvalue(), upload.name)
    if error:
        return None, error
    data_id = hashlib.sha1(upload.getvalue()).hexdigest()[:12]
    kept = DATA_KEPT.get()
    if kept is None or kept.data_id != data_id:
        kept = DATA_KEPT.set(Data(upload.name, data_id, rows, shape))
    return kept, None


def _on_upload() -> None:
    """A file removed from the box: its data are no longer in use.

    The box also reports an empty value when it is drawn again after another target hid it
    (drawn anew, it holds no file): that is not a removal. A removal empties a box that the page
    run just before showed with a file."""
    shown = BOX_SHOWN.get()
    removed = shown == (PAGE_RUNS.get(), True)
    if removed and st.session_state.get("rbm_upload") is None:
        DATA_KEPT.pop()


def _on_train() -> None:
    state = st.session_state
    upload = state.get("rbm_upload")
    data, error = _data(upload) if upload is not None else (DATA_KEPT.get(), None)
    if data is None or error:
        return
    old = state.get(KEY)
    if old is not None and old.running:
        return
    state[KEY] = start(
        data.rows, data.shape, data.data_id, int(state["rbm_hidden"]), int(state["rbm_epochs"])
    )


def _on_stop() -> None:
    job = st.session_state.get(KEY)
    if job is not None:
        job.stop = True


@st.fragment(run_every=0.5)
def _progress() -> None:
    """The bar and Stop, redrawn twice a second; drawn only while training (a fragment that
    draws nothing would leave its last bar greyed on the page), so its end reruns the page."""
    job = st.session_state.get(KEY)
    if job is not None and job.running:
        st.progress(min(1.0, job.fraction), text=f"Training: {plain(job.message)}")
        st.button("Stop training", key="rbm_stop", on_click=_on_stop)
    else:
        st.rerun(scope="app")  # done: the page takes the model, and the bar goes


def sidebar(sb) -> tuple[object, str] | None:
    """The upload and training controls; the trained model and its id once there is one."""
    from lsbcore.rbm.data import MAX_FILE_BYTES, MAX_ROWS, MAX_VISIBLE

    state = st.session_state
    with sb:
        st.file_uploader(
            "Your binary data (.npy or .zip)",
            type=DATA_TYPES,
            key="rbm_upload",
            on_change=_on_upload,
            help="An .npy array of 0/1 rows (2-D) or images (3-D), or a .zip of images of one "
            "size (binarised as the photo pipeline does: ink against paper). Up to "
            f"{upload_limit_mb(MAX_FILE_BYTES)} MB, {MAX_ROWS:,} rows and {MAX_VISIBLE:,} values a "
            "row.",
        )
        upload = state.get("rbm_upload")
        run, shown = PAGE_RUNS.get(), BOX_SHOWN.get()
        if upload is not None and (shown is None or shown[0] != run - 1) and DATA_KEPT.get():
            # back from another target: the browser may still send the file it held, but the
            # box is drawn anew, empty; the data kept are what is in use
            upload = None
        BOX_SHOWN.set((run, upload is not None))
        job = state.get(KEY)
        error = None
        data = DATA_KEPT.get()
        if upload is not None:
            data, error = _data(upload)
            if error:
                st.error(f"This file cannot be trained on: {plain(error)}")
        elif data is not None:  # the box was not drawn a while (another target): its data stay
            st.caption(
                f"Using {quote(data.name)}, read earlier in this session; upload another file "
                "to replace it."
            )
        if data is not None and error is None:
            rows, shape = data.rows, data.shape
            layout = f", images {grid_size(*shape)}" if shape else ""
            size = f"{counted(rows.shape[0], 'row')} of {counted(rows.shape[1], 'value')}"
            st.caption(f"{size}{layout}.")
        # the boxes' values come back from their kept copies when another target hid them
        HIDDEN_KEPT.set(ensure_in_range("rbm_hidden", HIDDEN_KEPT.get(), 1, MAX_HIDDEN))
        EPOCHS_KEPT.set(ensure_in_range("rbm_epochs", EPOCHS_KEPT.get(), 1, MAX_EPOCHS))
        state_again("rbm_hidden", "rbm_epochs")
        hidden = st.number_input("Hidden units", 1, MAX_HIDDEN, step=8, key="rbm_hidden")
        epochs = st.number_input("Training epochs", 1, MAX_EPOCHS, step=10, key="rbm_epochs")
        HIDDEN_KEPT.set(hidden)
        EPOCHS_KEPT.set(epochs)
        st.button(
            "Train",
            key="rbm_train",
            on_click=_on_train,
            disabled=data is None or error is not None or (job is not None and job.running),
            help=f"Persistent contrastive divergence, seeded; stopped after {MAX_SECONDS:.0f} s "
            "at most. The model stays in this session.",
        )
        if job is not None and job.running:
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
