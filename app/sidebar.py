"""The sidebar: configure the posterior, the samplers and the run; returns what the user chose.

Widget values live in Session State under the keys of ``Config``'s fields (also the query
parameter names). One state model keeps them: Streamlit forgets the value of a widget it did not
draw in the last run and calls callbacks before the script, so every run and every callback
starts from ``_complete`` (each key gets a value, from the last configuration ``_saved`` where
its widget was hidden), and every run states every key again before any widget is drawn (a
widget whose bounds or label changed is a new widget to Streamlit, which would otherwise start
it at its default). Every change of source, case, sample, upload or data model goes through
``_changed``; ``_fit_workload`` then keeps chains, resolution and thinning within the bounds.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, fields, replace

import numpy as np
import streamlit as st
import torch

import lsbcore
from app import config as cfgmod
from app import (
    large_builds,
    network_sidebar,
    network_targets,
    page_state,
    rbm_sidebar,
    rbm_targets,
    sources,
    view_links,
)
from app.config import BOUNDS, Config
from app.page_state import ensure, ensure_in_range
from app.target_kind import TargetKind, kind_of
from app.text import counted, plain, quote
from app.upload_limit import upload_limit_mb
from lsbcore.backends import AUTO_NOTE, AUTO_PICKS_CUDA
from lsbcore.image import MAX_BYTES as IMAGE_MAX_BYTES
from lsbcore.samplers import warmup
from lsbcore.samplers.registry import SamplerSpec
from lsbcore.segmentation.starts import START_LABELS

log = logging.getLogger(__name__)

SOURCE_LABELS = {"paper": "Paper case", "sample": "Sample image", "upload": "Your image"}
# What the multiselect adds to a sampler's registry label, so the kind shows at a glance
FAMILY_NOTES = {
    "learned": "learned",
    "uninformed": "uninformed baseline",
    "block": "block: one sweep per step",
    "flow": "flow trained on the posterior",
}


def sampler_option_label(spec: SamplerSpec) -> str:
    """The multiselect's text for a sampler: its label, then its kind (two spaces apart)."""
    note = "learned function from JSON" if spec.needs_balancing else FAMILY_NOTES.get(spec.family)
    return f"{spec.label}  ({note})" if note else spec.label


SAMPLER_LABELS = {name: sampler_option_label(spec) for name, spec in lsbcore.REGISTRY.items()}
#: Samplers built from an uploaded balancing function (the sidebar asks for the file).
NEEDS_FILE = tuple(name for name, spec in lsbcore.REGISTRY.items() if spec.needs_balancing)
SAMPLE_NOTES = {
    "synthetic_disc_letter": "A dark disc and letter under heavy noise; the true mask is known.",
    "camera": "A photograph (512 px): dark coat and tripod against sky and grass.",
    "coffee": "A colour photograph (600 x 400): a red cup and saucer on a wooden table; "
    "more than two classes, so a two-class model has to choose.",
    "horse": "A clean black silhouette: the easy case.",
    "cell": "A bright cell on a gray background: the object is bright.",
}
IMAGE_TYPES = ["png", "jpg", "jpeg", "gif", "webp", "tif", "tiff", "bmp"]
# each source's settings as it was left, {source: (configuration dict, size note, fallback
# size)}: a source chosen again comes back as it was (its resolution, its model's parameters)
KEPT_SOURCES = "_kept_sources"
# each target's settings as it was left, the same way: the Ising posterior comes back with its
# source and model, a network or an RBM with the samplers and run lengths chosen for it
KEPT_TARGETS = "_kept_targets"
# settings of the page, not of a source or target: they stay as last set when one comes back
PAGE_WIDE = ("speed", "device")
# a photo's size picked before this machine's speed was measured (the kernels still compiling):
# picked again once it is, unless the size was changed or the photo's run has begun
FALLBACK_SIZE = "_size_fallback"
REPICK = "_size_repick"  # the speed has arrived: the next page run picks again
SPEED_POLL_S = 1.0  # how often a page with a fallback size asks whether the speed is in


@dataclass
class Inputs:
    """What the sidebar hands to the page: the configuration and the data it refers to."""

    config: Config
    image: np.ndarray | None = None  # the working-resolution luma (image sources)
    photo: lsbcore.Photo | None = None  # the same image in colour, with its original size
    source: object = None  # the image file again (a path or the upload's bytes), full size
    dark_mask: np.ndarray | None = None  # the true dark-object mask, where known
    image_id: str | None = None  # identifies the uploaded file (rebuild on a new upload)
    name: str | None = None  # the uploaded file's name: the run and its downloads carry it
    learned_json: bytes | None = None
    learned_id: str | None = None
    rbm: object = None  # an RBM target's model (lsbcore.targets.rbm.RBM), once there is one
    network: object = None  # a network target's FactorGraph, once there is one


# ----------------------------------------------------------------------------- state model
def _state_from_config(cfg: Config) -> None:
    state = st.session_state
    for f in fields(Config):
        value = getattr(cfg, f.name)
        state[f.name] = list(value) if f.name == "samplers" else value


def init_from_link(samples: tuple[str, ...]) -> list[str]:
    """On a session's first run, set the widgets from the query parameters; return warnings."""
    state = st.session_state
    if state.get("_initialised"):
        return []
    state["_initialised"] = True
    params = {key: st.query_params.get_all(key) for key in st.query_params}
    cfg, warnings = cfgmod.from_query_params(params, samples)
    cfg = cfg or Config()
    _state_from_config(cfg)
    state["_saved"] = cfg.as_dict()
    views, view_warnings = view_links.from_query_params(params)
    view_links.init(state, views)
    return warnings + view_warnings


def _complete() -> None:
    """Give every configuration key a value, from the last configuration where it was hidden."""
    state = st.session_state
    saved = state.get("_saved") or Config().as_dict()
    for f in fields(Config):
        if f.name not in state:
            state[f.name] = saved[f.name]


def _restate() -> None:
    """Write every configuration key again before any widget is drawn in this run: a hidden
    widget's value then outlives the run, and a widget whose bounds changed (the chains slider
    after a new resolution) keeps its value instead of restarting at its minimum."""
    state = st.session_state
    for f in fields(Config):
        state[f.name] = state[f.name]


def _apply_defaults(values: dict) -> None:
    for key, value in values.items():
        st.session_state[key] = list(value) if key == "samplers" else value


def _keep_left(kept_key: str, left: str | None, chosen: str) -> dict:
    """Keep the settings of the ``left`` source or target (the last run's configuration) under
    ``kept_key`` for its return, unless it is the one ``chosen``; return what is kept."""
    state = st.session_state
    saved = state.get("_saved") or Config().as_dict()
    kept = state.setdefault(kept_key, {})
    if left is not None and left != chosen:
        kept[left] = (dict(saved), state.get("_size_note"), state.pop(FALLBACK_SIZE, None))
    return kept


def _take_kept(kept: dict, chosen: str, own: tuple[str, ...]) -> bool:
    """Give the settings ``chosen`` had when it was left back to the widgets (all but ``own``,
    the fields that name it, and the page-wide ones); False when it has none kept."""
    if chosen not in kept:
        return False
    values, note, fallback = kept.pop(chosen)
    skip = (*own, *PAGE_WIDE)
    _apply_defaults({k: v for k, v in values.items() if k not in skip})
    st.session_state["_size_note"] = note
    if fallback is not None:
        st.session_state[FALLBACK_SIZE] = fallback
    return True


def _on_target() -> None:
    """A new target: the settings it had when it was left (its samplers, chains and run
    lengths; the Ising posterior's source and model too), else its own defaults (an RBM's or
    a network's, or the Ising source's); the target left keeps its settings for its return."""
    state = st.session_state
    target = state["target"]
    saved = state.get("_saved") or Config().as_dict()
    kept = _keep_left(KEPT_TARGETS, saved.get("target"), target)
    if _take_kept(kept, target, ("target",)):
        return
    if kind_of(target) is not TargetKind.ISING:
        _apply_defaults(cfgmod.target_defaults(target))
        return
    source = state["source"]
    _apply_defaults(
        {
            **cfgmod.source_defaults(source, state["case"], state["sample"]),
            "chains": Config().chains if source == "paper" else cfgmod.IMAGE_CHAINS,
            "thin": 1,
        }
    )


def _on_source() -> None:
    """A new source: the settings it had when it was left (its resolution, its model's
    parameters), else its defaults; the settings of the source left are kept for its return."""
    state = st.session_state
    source = state["source"]
    saved = state.get("_saved") or Config().as_dict()
    left = saved.get("source") if saved.get("target") == "ising" else None
    kept = _keep_left(KEPT_SOURCES, left, source)
    if _take_kept(kept, source, ("target", "source")):
        return
    _apply_defaults(cfgmod.source_defaults(source, state["case"], state["sample"]))
    if source != "paper":
        _pick_size()


def _on_case() -> None:
    _apply_defaults(cfgmod.source_defaults("paper", st.session_state["case"]))


def _on_sample() -> None:
    sample = st.session_state["sample"]
    model = cfgmod.source_defaults("sample", sample=sample)["model"]
    _apply_defaults({"model": model, **cfgmod.model_defaults(model)})
    _pick_size()


def _on_model() -> None:
    _apply_defaults(cfgmod.model_defaults(st.session_state["model"]))


def _on_upload() -> None:
    """A new photo is kept (the box is drawn only for "Your image", and Streamlit forgets the
    file of a box it did not draw) and gets its working resolution; a removed one is dropped."""
    state = st.session_state
    file = state.get("upload")
    if file is None:
        state.pop("_kept_upload", None)
        return
    state["_kept_upload"] = file
    photo, _ = _decoded_upload(file, 16)
    if photo is not None:  # an undecodable file keeps the size; its error shows in the box
        _pick_size()


_CHANGES = {
    "target": _on_target,
    "source": _on_source,
    "case": _on_case,
    "sample": _on_sample,
    "model": _on_model,
    "upload": _on_upload,
}


def _changed(what: str) -> None:
    """The one callback: complete the state, apply the change; a failure becomes a sentence."""
    _complete()
    try:
        _CHANGES[what]()
    except Exception:  # the page must not lose its sidebar to one bad change
        log.exception("sidebar change %r failed", what)
        st.session_state["_change_error"] = (
            f"Applying the new {cfgmod.LABELS.get(what, what)} failed; the other settings are "
            "unchanged. Choose again, or reload the page."
        )


def _least_chains() -> int:
    """Whether a photo has settled is judged across its chains: stopping when settled needs 2."""
    state = st.session_state
    if kind_of(state["target"]) is not TargetKind.ISING:
        return 1
    return 2 if state["source"] != "paper" and state["until_settled"] else 1


def _fit_workload() -> dict[str, str]:
    """Keep chains, resolution and thinning within the session's bounds before the widgets are
    drawn (so that they show the values in use); return a note per widget that was moved."""
    state = st.session_state
    notes: dict[str, str] = {}
    ensure_in_range("chains", Config().chains, *BOUNDS["chains"][1:])
    ensure_in_range("size", Config().size, *BOUNDS["size"][1:])
    ensure_in_range("thin", 1, *BOUNDS["thin"][1:])
    kind = kind_of(state["target"])
    if kind is TargetKind.RBM:  # no lattice and no traces: the bounds hold
        return notes
    n_samplers = max(1, len(state["samplers"]))
    if kind is TargetKind.NETWORK:  # no lattice: only the traces' memory is bounded
        _fit_thin(notes, n_samplers)
        return notes
    least = _least_chains()
    if state["chains"] < least:
        notes["chains"] = (
            f"{counted(least, 'chain')} per sampler at least: whether a photo has settled is "
            "judged across chains."
        )
        state["chains"] = least
    size = int(state["size"])
    if cfgmod.max_chains(size, n_samplers) < least:
        state["size"] = cfgmod.max_size(least, n_samplers)
        notes["size"] = (
            f"Working resolution reduced from {size} to {state['size']} px so that "
            f"{counted(n_samplers, 'sampler')} × {least} chains fit: resolution² × chains × "
            f"samplers stays within {cfgmod.MAX_WORKLOAD:,}."
        )
    most = cfgmod.max_chains(int(state["size"]), n_samplers)
    if state["chains"] > most:
        notes["chains"] = (
            f"Chains reduced from {state['chains']} to {most}: resolution² × chains × samplers "
            f"stays within {cfgmod.MAX_WORKLOAD:,} so that one session stays responsive."
        )
        state["chains"] = most
    _fit_thin(notes, n_samplers)
    return notes


def _fit_thin(notes: dict[str, str], n_samplers: int) -> None:
    """Record sparsely enough that the traces stay within their memory bound."""
    state = st.session_state
    total = int(state["burn_in"]) + int(state["steps"])
    thin = cfgmod.min_thin(total, int(state["chains"]), n_samplers)
    if state["thin"] < thin:
        notes["thin"] = (
            f"Recording every {thin} steps instead of every {state['thin']}: the traces stay "
            "within their memory bound (the paper ESS then counts lags in recorded draws)."
        )
        state["thin"] = thin


def _uploaded():
    """The photo in the upload box, else the one uploaded earlier in this session (or None)."""
    state = st.session_state
    return state.get("upload") or state.get("_kept_upload")


def _original_shape() -> tuple[int, int] | None:
    """The chosen image's size at full resolution (before scaling to the lattice)."""
    state = st.session_state
    if state.get("source") == "sample":
        return _sample_image(state["sample"], 16).original_shape
    file = _uploaded() if state.get("source") == "upload" else None
    if file is not None:
        photo, _ = _decoded_upload(file, 16)
        return None if photo is None else photo.original_shape
    return None


def _pick_size() -> None:
    """The working resolution for a newly chosen image, from this machine's measured speed."""
    rate = warmup.site_update_rate() or math.nan
    shape = _original_shape()
    size = cfgmod.pick_size(rate, shape)
    st.session_state["size"] = size
    st.session_state["_size_note"] = _size_note(size, rate, shape)
    if math.isfinite(rate):
        st.session_state.pop(FALLBACK_SIZE, None)
    else:
        st.session_state[FALLBACK_SIZE] = size


def _repick_when_measured() -> None:
    """Pick a photo's size again once the speed its fallback size waited for is measured
    (``_await_speed`` asks for it); a size changed by hand, another source, or a run begun at
    the fallback size keeps its own (the note then says what the speed would pick)."""
    state = st.session_state
    fallback = state.get(FALLBACK_SIZE)
    if fallback is None:
        return
    if state.get("source") == "paper" or state.get("size") != fallback:
        state.pop(FALLBACK_SIZE, None)
        state.pop(REPICK, None)
        return
    if not state.pop(REPICK, False):
        return
    run = page_state.RUN.get()
    if run is None or not (run.running or run.n_steps > 0):
        _pick_size()
        return
    state.pop(FALLBACK_SIZE)
    rate = warmup.site_update_rate() or math.nan
    state["_size_note"] = _kept_size_note(fallback, rate, _original_shape())


def _await_speed() -> None:
    """Polled while a photo's size is the fallback one: once the speed is measured, rerun the
    page, whose sidebar picks the size again (``_repick_when_measured``)."""
    state = st.session_state
    if FALLBACK_SIZE in state and warmup.site_update_rate() is not None:
        state[REPICK] = True
        st.rerun()


def _kept_size_note(size: int, rate: float, shape: tuple[int, int] | None) -> str:
    """The note on a fallback size kept for a run begun before the speed was measured."""
    better = cfgmod.pick_size(rate, shape)
    if not math.isfinite(rate) or better == size:
        return _size_note(size, rate, shape)
    seconds = cfgmod.settle_seconds(rate, better, shape)
    return (
        f"Picked {size} px before this machine's speed was measured, and kept: its run has "
        f"begun. At the measured speed ({rate / 1e6:.0f} M site updates/s) {better} px would "
        f"settle in about {max(seconds, 1):.0f} s; set the resolution to it to start again there."
    )


def _size_note(size: int, rate: float, shape: tuple[int, int] | None) -> str:
    if not math.isfinite(rate):
        return (
            f"Picked {size} px: this machine's speed is not measured yet (the sampler is still "
            "compiling). The size is picked again once it is, unless you set it yourself or "
            "start the run first."
        )
    seconds = cfgmod.settle_seconds(rate, size, shape)
    took = "under a second" if seconds < 1 else f"about {seconds:.0f} s"
    return (
        f"Picked {size} px: most photos settle within about {cfgmod.SETTLE_SWEEPS} sweeps of "
        f"{counted(cfgmod.IMAGE_CHAINS, 'chain')}, {took} at this size here (the sampler alone: "
        f"{rate / 1e6:.0f} M site updates/s, measured; the live page reaches about "
        f"{cfgmod.PAGE_SHARE:.0%} of that)."
    )


# ----------------------------------------------------------------------------- decoding
@st.cache_data(max_entries=16, show_spinner=False)
def _sample_image(name: str, size: int) -> lsbcore.Photo:
    return sources.load_sample(name, size)


@st.cache_data(max_entries=16, show_spinner=False)
def _sample_mask(name: str, size: int) -> np.ndarray | None:
    return sources.sample_dark_mask(name, size)


def _decoded_upload(file, size: int) -> tuple[lsbcore.Photo | None, str | None]:
    """Decode an uploaded file once per (file, resolution); remembered in Session State."""
    cache = st.session_state.setdefault("_upload_cache", {})
    key = (file.file_id, size)
    if key not in cache:
        for old in [k for k in cache if k[0] != file.file_id or k[1] != 16]:
            del cache[old]  # keep the small decode that gives the original size
        try:
            with large_builds.one_at_a_time():  # a large photo's decode peaks at hundreds of MB
                cache[key] = sources.read_upload(file.getvalue(), size)
        except large_builds.BuildBusy:  # not remembered: the next rerun tries again
            return None, f"The photo was not read yet: {large_builds.BUSY}."
    return cache[key]


def _learned_error(file) -> str | None:
    cache = st.session_state.setdefault("_learned_cache", {})
    if file.file_id not in cache:
        cache.clear()
        try:
            lsbcore.load_balancing(file.getvalue())
            cache[file.file_id] = None
        except ValueError as err:
            cache[file.file_id] = str(err)
        except Exception as err:  # anything else the file provokes is a refusal, not a crash
            log.exception("learned-function upload failed")
            cache[file.file_id] = f"it cannot be read ({type(err).__name__})."
    return cache[file.file_id]


# ----------------------------------------------------------------------------- widgets
def _number(container, label: str, key: str, help: str, step, fmt: str | None = None):
    kind, low, high = BOUNDS[key]
    ensure_in_range(key, kind(getattr(Config(), key)), kind(low), kind(high))
    if kind is float:
        st.session_state[key] = float(st.session_state[key])
    return container.number_input(
        label, kind(low), kind(high), step=step, key=key, help=help, format=fmt
    )


def _target(sb) -> str:
    """The target picker: the Ising segmentation posterior or an RBM."""
    state = st.session_state
    if state.get("_change_error"):
        sb.error(state.pop("_change_error"))
    ensure("target", "ising", lambda v: v in rbm_targets.TARGETS)
    return sb.selectbox(
        "Target",
        rbm_targets.TARGETS,
        format_func=rbm_targets.TARGET_LABELS.get,
        key="target",
        on_change=_changed,
        args=("target",),
        help="What the samplers sample: the Ising posterior of an image segmentation (the "
        "paper's section 5.1), a restricted Boltzmann machine trained on handwritten digits "
        "(section 5.2), shipped at 8 × 8 and 16 × 16 pixels, or trained here on your own data, "
        "or a Markov network with near-deterministic factors (the paper's Table 3: MN 1 and "
        "MN 2 as generated here, or your own UAI file).",
    )


def _posterior(sb, samples: tuple[str, ...], notes: dict[str, str]) -> Inputs:
    state = st.session_state
    sb.header("Configure the posterior")
    ensure("source", "paper", lambda v: v in cfgmod.SOURCES)
    source = sb.radio(
        "Source",
        cfgmod.SOURCES,
        format_func=SOURCE_LABELS.get,
        key="source",
        horizontal=True,
        on_change=_changed,
        args=("source",),
        help="The paper's four synthetic cases, a shipped sample image, or your own image. "
        "Choosing a source sets its default parameters.",
    )
    inputs = Inputs(config=Config())
    if source == "paper":
        ensure("case", 3, lambda v: v in lsbcore.PAPER_CASES)
        sb.selectbox(
            "Paper case",
            list(lsbcore.PAPER_CASES),
            format_func=lambda c: "Case {}: {} (λ={:g}, μ={:g}, σ={:g})".format(
                c, *lsbcore.PAPER_CASES[c][:4]
            ),
            key="case",
            on_change=_changed,
            args=("case",),
            help="Sansone (2022), section 5: an n×n periodic lattice, +1 on the central square. "
            "Every chain gets its own noisy α = μ·truth + U(−σ, σ).",
        )
        ensure("shared_alpha", False, lambda v: isinstance(v, bool))
        sb.checkbox(
            "One α for all chains",
            key="shared_alpha",
            help="The paper gives every chain its own noisy α, so its chains sample different "
            "posteriors and pooled R-hat and bulk ESS compare unlike things. Ticked, every chain "
            "uses chain 1's α: one posterior, and the Mixing tab shows pooled R-hat.",
        )
    elif source == "sample":
        ensure("sample", samples[0] if samples else "", lambda v: v in samples)
        sb.selectbox(
            "Sample image",
            samples,
            key="sample",
            on_change=_changed,
            args=("sample",),
            help="Images shipped in assets/ (see assets/README.md): a synthetic one whose true "
            "mask is known, and public-domain photographs.",
        )
        sb.caption(SAMPLE_NOTES.get(state["sample"], ""))
    else:
        limit = upload_limit_mb(IMAGE_MAX_BYTES)
        sb.file_uploader(
            "Upload an image",
            type=IMAGE_TYPES,
            key="upload",
            on_change=_changed,
            args=("upload",),
            help=f"PNG, JPEG, GIF, WebP, TIFF or BMP, up to {limit} MB. It is scaled down to "
            "the working resolution (colour kept for the fitted model). Files of other types "
            f"or over {limit} MB are refused by the browser: point at the red file to see why.",
        )
    size_label = "Lattice size n" if source == "paper" else "Working resolution (longer side, px)"
    top = cfgmod.MAX_SIZE
    if "size" in notes:
        sb.caption(notes["size"])
    size = sb.slider(
        size_label,
        16,
        top,
        key="size",
        help="Sites per side: the paper uses n = 30. Images are scaled down (box filter, aspect "
        "ratio kept) so that the longer side has this many pixels; a new image starts at the "
        "size this machine settles in about 5 s. The outputs are delivered at the photo's own "
        "size (upsampled from this lattice).",
    )
    if source != "paper" and state.get("_size_note"):
        sb.caption(state["_size_note"])
    if source != "paper" and FALLBACK_SIZE in state:
        with sb:
            st.fragment(_await_speed, run_every=SPEED_POLL_S)()
    if source == "sample" and samples:
        inputs.photo = _sample_image(state["sample"], size)
        inputs.source = sources.ASSETS / f"{state['sample']}.png"
        inputs.dark_mask = _sample_mask(state["sample"], size)
        inputs.image_id = f"sample:{state['sample']}"
    elif source == "upload":
        file = _uploaded()
        if file is None:
            sb.info("Upload an image above to segment it.")
        else:
            if state.get("upload") is None:  # kept from an earlier visit to "Your image"
                sb.caption(f"Using {quote(file.name)}; upload another image to replace it.")
            photo, error = _decoded_upload(file, size)
            if error:
                sb.error(plain(error))
            else:
                inputs.photo = photo
                inputs.source = file.getvalue()
                inputs.image_id = f"upload:{file.file_id}"
                inputs.name = file.name
    if inputs.photo is not None:
        inputs.image = inputs.photo.luma
    if inputs.image is not None and sources.is_uniform(inputs.photo):
        sb.warning("This image has a single colour: there is nothing to segment.")

    if source != "paper":
        ensure("model", "mixture", lambda v: v in cfgmod.MODELS)
        sb.radio(
            "Data model",
            cfgmod.MODELS,
            format_func={"mixture": "fitted to the photo", "threshold": "mid-grey threshold"}.get,
            key="model",
            horizontal=True,
            on_change=_changed,
            args=("model",),
            help="fitted to the photo: a two-class Gaussian mixture fitted by EM (started at "
            "Otsu's threshold), in CIELAB colour for colour photos; αᵢ is half the log-likelihood "
            "ratio of object against background. mid-grey threshold: the paper-style model "
            "yᵢ ~ N(μ xᵢ, σ²) on y = 2I − 1, a fixed threshold at mid-grey.",
        )
        ensure("polarity", "auto", lambda v: v in cfgmod.POLARITIES)
        sb.radio(
            "Object",
            cfgmod.POLARITIES,
            format_func={
                "auto": "auto",
                "dark": "the darker class",
                "bright": "the brighter class",
            }.get,
            key="polarity",
            horizontal=True,
            help="Which class is the object (x = +1). auto: the class that touches the image "
            "border less; the page says what it picked and why.",
        )
    _number(
        sb,
        "λ: coupling (smoothness prior)",
        "lam",
        "λ ≥ 0 in log p̃(x) = Σᵢ αᵢxᵢ + λ Σ_{i~j} xᵢxⱼ. λ = 0: pixels independent; larger λ "
        "makes neighbours agree and the mask smoother.",
        0.1,
    )
    mixture = source != "paper" and state.get("model") == "mixture"
    if source == "paper":
        mu_help = "Signal level: the paper's α = μ·truth + U(−σ, σ)."
        sigma_help = (
            "Noise level: half-width of the uniform noise added to α (σ = 3 is 'noisy' with μ = 1)."
        )
    elif mixture:
        mu_help = (
            "Weight of the data against the prior: αᵢ = μ · ½ [log N(yᵢ; object) − "
            "log N(yᵢ; background)]. 1 uses the fitted likelihood as it is; smaller lets λ smooth "
            "more."
        )
        sigma_help = (
            "Widens both fitted classes by this factor (their covariances times σ²): 1 is the "
            "fit as it is; larger trusts each pixel less."
        )
    else:
        mu_help = (
            "Signal level of the observation model yᵢ ~ N(μ xᵢ, σ²), with y = 2I − 1 "
            "(or 1 − 2I for a dark object) in [−1, 1]; the data term is αᵢ = μ yᵢ / σ²."
        )
        sigma_help = "Noise level of the observation model; the data term's strength is μ/σ²."
    _number(sb, "μ: data weight" if mixture else "μ: signal level", "mu", mu_help, 0.1)
    _number(sb, "σ: class spread" if mixture else "σ: noise level", "sigma", sigma_help, 0.05)
    ensure("boundary", "free", lambda v: v in cfgmod.BOUNDARIES)
    sb.radio(
        "Boundary",
        cfgmod.BOUNDARIES,
        key="boundary",
        horizontal=True,
        help="free: edge pixels have fewer neighbours (natural for images). periodic: the "
        "lattice wraps around as a torus (the paper's code).",
    )
    if source != "paper":
        _number(
            sb,
            "Synthetic noise (sd)",
            "noise",
            "Adds Gaussian noise of this standard deviation to y = 2I − 1 (every channel, clipped "
            "to the image's range), for demos. Without a known mask the clean image's "
            "segmentation at λ = 0 then serves as ground truth (accuracy is tracked).",
            0.05,
        )
    _number(
        sb,
        "Seed",
        "seed",
        "Seeds the noise, the shared random start and each sampler's random numbers: the same "
        "seed gives the same run.",
        1,
    )
    return inputs


def _offered() -> tuple[str, ...]:
    """The samplers the chosen target offers, in the multiselect's order (a network's: those
    that can run on some network; the multiselect offers those that run on the chosen one)."""
    kind = kind_of(st.session_state.get("target", "ising"))
    if kind is TargetKind.RBM:
        return rbm_targets.labels()
    if kind is TargetKind.NETWORK:
        return network_targets.SAMPLERS
    return cfgmod.SAMPLER_ORDER


def _known_samplers(value) -> bool:
    offered = _offered()
    return isinstance(value, list) and all(n in offered for n in value)


def _samplers(sb, network=None) -> tuple[bytes | None, str | None]:
    state = st.session_state
    sb.header("Samplers")
    kind = kind_of(state["target"])
    if kind is not TargetKind.ISING:
        if kind is TargetKind.RBM:
            rbm_sidebar.samplers(sb)
        else:
            network_sidebar.samplers(sb, network)
        _learning()
        return None, None
    sb.multiselect(
        "Samplers to compare",
        cfgmod.SAMPLER_ORDER,
        format_func=lambda n: SAMPLER_LABELS.get(n, n),
        key="samplers",
        help="\n".join(
            f"- **{lsbcore.REGISTRY[n].label}**: {lsbcore.REGISTRY[n].description}"
            for n in cfgmod.SAMPLER_ORDER
        )
        + "\n\nThe learned ones learn during burn-in; an imported one is saved from Export. "
        "The flow samplers wait for their flow, trained in the background (the Flow tab).",
    )
    learned_json = learned_id = None
    if any(n in NEEDS_FILE for n in state["samplers"]):
        file = sb.file_uploader(
            "Learned function (JSON)",
            type=["json"],
            key="learned_file",
            help="A file from Export → learned balancing functions. It is used frozen.",
        )
        if file is None:
            sb.warning("The imported sampler needs a learned-function JSON; it is left out.")
        else:
            error = _learned_error(file)
            if error:
                sb.error(f"This learned function cannot be used: {plain(error)}")
            else:
                learned_json, learned_id = file.getvalue(), file.file_id
    if any(n in cfgmod.FLOW_SAMPLERS for n in state["samplers"]):
        _flow_settings(sb)
    _learning()
    return learned_json, learned_id


def _flow_settings(sb) -> None:
    """The flow samplers' training length (seeded by the run's seed)."""
    _number(
        sb,
        "Flow training steps",
        "flow_steps",
        "Steps of training of the flow before the flow samplers join the run (Adam, batches "
        "of 128, seeded by the seed below); 0: the untrained flow. Training runs in the "
        "background and can be stopped and resumed; the other samplers run meanwhile. On the "
        "CPU a flow sampler's step costs about a hundred of Barker's (a 30 x 30 lattice, 4 "
        "chains: 22 steps/s for Flow (exact), 165 for Flow latent). A flow sampler that joins "
        "late takes the run's steps of its own, and the run waits for it.",
        100,
    )
    if not st.session_state.get("shared_alpha") and st.session_state.get("source") == "paper":
        sb.caption(
            'A flow is trained on one posterior: tick "One α for all chains" above to run '
            "the flow samplers on a paper case."
        )


def _learning() -> None:
    """The learning rate, optimiser and LSB 2 width of the learned samplers."""
    sb = st.sidebar
    kind = kind_of(st.session_state["target"])
    if kind is TargetKind.RBM:
        learners = rbm_sidebar.LEARNERS
    elif kind is TargetKind.NETWORK:
        learners = network_sidebar.learners()
    else:
        learners = ", ".join(s.label for s in lsbcore.REGISTRY.values() if s.app and s.learnable)
    with sb.expander(f"Learning ({learners})"):
        _number(
            st,
            "Learning rate",
            "lr",
            "Step size of the optimiser that adapts the balancing function during burn-in "
            "(paper: 1e-2).",
            0.001,
            "%.4g",
        )
        ensure("optimizer", "adam", lambda v: v in cfgmod.OPTIMIZERS)
        st.radio(
            "Optimiser",
            cfgmod.OPTIMIZERS,
            format_func={"adam": "Adam (authors' code)", "sgd": "SGD + momentum (paper)"}.get,
            key="optimizer",
            horizontal=True,
        )
        _number(
            st,
            "LSB 2 width (hidden units)",
            "hidden",
            "Hidden ReLU units of LSB 2's network h (paper: 10).",
            1,
        )


def _run_settings(sb, source: str, notes: dict[str, str], speed_here: bool) -> None:
    sb.header("Run")
    state = st.session_state
    kind = kind_of(state["target"])
    rbm = kind is not TargetKind.ISING  # no lattice: an RBM or a network
    if rbm:  # the image sources' widgets (start, stop when settled) are not for these
        source = "paper"
    least = _least_chains()
    if rbm:
        most = BOUNDS["chains"][2]
        notes = {k: v for k, v in notes.items() if k == "thin"}  # a network's traces
    else:
        most = cfgmod.max_chains(int(state["size"]), len(state["samplers"]))
    if "chains" in notes:
        sb.caption(notes["chains"])
    sb.slider(
        "Chains per sampler",
        least,
        max(least + 1, most),
        key="chains",
        disabled=most <= least,
        help="Independent chains; every sampler starts its chains from the same states (the "
        "paper uses 30). Judging whether a photo's result has settled needs at least 2. At most "
        f"{most} here: resolution² × chains × samplers stays within {cfgmod.MAX_WORKLOAD:,}.",
    )
    if source != "paper" and not rbm:
        ensure("start", "mixed", lambda v: v in cfgmod.STARTS)
        sb.radio(
            "Chains start",
            cfgmod.STARTS,
            format_func={"mixed": "mixed", "data": "from the data", "random": "at random"}.get,
            key="start",
            horizontal=True,
            help="from the data: "
            + START_LABELS["data"]
            + " (the MAP at λ = 0). at random: "
            + START_LABELS["random"]
            + ". mixed: "
            + START_LABELS["mixed"]
            + ": chains that start apart are what lets the settled indicator see a run that "
            "has not settled.",
        )
    step_note = (
        " A block Gibbs step updates one block of sites."
        if kind is TargetKind.RBM
        else ""
        if kind is TargetKind.NETWORK
        else " For block Gibbs a step is one sweep (every site updated once)."
    )
    _number(
        sb,
        "Burn-in steps",
        "burn_in",
        "Steps during which LSB 1 / LSB 2 learn; then their functions freeze and the "
        "diagnostics and marginals start (paper: 2000)." + step_note,
        100 if source == "paper" else 10,
    )
    _number(
        sb,
        "Mixing steps",
        "steps",
        "Steps after burn-in (paper: 30 000)." + step_note,
        1000 if source == "paper" else 100,
    )
    if source != "paper" and not rbm:
        ensure("until_settled", True, lambda v: isinstance(v, bool))
        sb.checkbox(
            "Stop when settled",
            key="until_settled",
            help="Pause once every sampler's P(x = +1) has settled: at most 1% of the sites "
            "with split R-hat above 1.01 across the chains (Segmentation tab). Run again to "
            "keep refining.",
        )
    if kind is not TargetKind.ISING:  # the Ising page's seed sits with its posterior (the noise)
        _number(
            sb,
            "Seed",
            "seed",
            "Seeds the shared random start and each sampler's random numbers"
            + (" (and the network's drawing)" if kind is TargetKind.NETWORK else "")
            + ": the same seed gives the same run.",
            1,
        )
    if "thin" in notes:
        sb.caption(notes["thin"])
    if kind is not TargetKind.RBM:  # an RBM run keeps no traces, only its MMD checkpoints
        _number(
            sb,
            "Record every (steps)",
            "thin",
            "Trace thinning. 1 reproduces the paper's ESS, which counts lags in recorded draws.",
            1,
        )
    ensure("device", "auto", lambda v: v in cfgmod.DEVICES)
    sb.radio(
        "Device",
        cfgmod.DEVICES,
        key="device",
        horizontal=True,
        help="auto picks the faster path: the CPU's compiled steps, until device kernels are "
        "measured faster on a real GPU. If CUDA fails the run falls back to the CPU and says so.",
    )
    if torch.cuda.is_available():
        sb.caption(f"GPU: {torch.cuda.get_device_name(0)}. {device_note()}")
    else:
        sb.caption("No CUDA GPU here: runs on the CPU.")
    if speed_here:
        speed_control(sb)


def speed_control(where) -> None:
    """The speed cap, in ``where``: the sidebar, or presentation mode's header."""
    ensure("speed", "auto", lambda v: v in cfgmod.SPEEDS)
    where.select_slider(
        "Speed (steps per refresh)",
        cfgmod.SPEEDS,
        key="speed",
        format_func=lambda v: "auto" if v == "auto" else v,
        help="auto: as many steps as fit between refreshes (about 5 per second). A number "
        "caps it: 1 watches single flips.",
    )


def device_note() -> str:
    """What "auto" means on a machine with a GPU."""
    return AUTO_NOTE if not AUTO_PICKS_CUDA else "auto samples on the GPU."


def render(samples: tuple[str, ...], speed_here: bool = True) -> Inputs:
    """Draw the sidebar and return the configuration and data it describes (the speed cap
    elsewhere when not ``speed_here``: presentation mode draws it in its header)."""
    _complete()
    ensure("target", "ising", lambda v: v in rbm_targets.TARGETS)
    kind = kind_of(st.session_state["target"])
    default_samplers = {
        TargetKind.RBM: rbm_targets.DEFAULT_SAMPLERS,
        TargetKind.NETWORK: network_targets.DEFAULT_SAMPLERS,
    }.get(kind, Config().samplers)
    ensure("samplers", list(default_samplers), _known_samplers)
    _repick_when_measured()
    notes = _fit_workload()
    _restate()
    sb = st.sidebar
    target = _target(sb)
    kind = kind_of(target)
    if kind is not TargetKind.ISING:
        inputs = Inputs(config=Config())
        (rbm_sidebar if kind is TargetKind.RBM else network_sidebar).model(sb, inputs)
    else:
        inputs = _posterior(sb, samples, notes)
    inputs.learned_json, inputs.learned_id = _samplers(sb, inputs.network)
    _run_settings(sb, st.session_state["source"], notes, speed_here)
    state = st.session_state
    values = {f.name: state[f.name] for f in fields(Config) if f.name != "samplers"}
    cfg, problems = cfgmod.validate(values, samples)
    for problem in problems:  # widgets keep values in range; this catches the unexpected
        sb.warning(problem)
    chosen = [n for n in _offered() if n in state["samplers"]]
    state["_saved"] = replace(cfg, samplers=tuple(chosen)).as_dict()
    if inputs.learned_json is None:
        chosen = [n for n in chosen if n not in NEEDS_FILE]
    inputs.config = replace(cfg, samplers=tuple(chosen))
    return inputs
