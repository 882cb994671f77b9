"""View 7, Segmentation: the posterior marginal, the thresholded mask over the image, where the
posterior is unsure (binary entropy), whether the marginal has settled, and, for images, the
exact MAP beside it; everything downloads at the photo's own size, at most
``photo_downloads.MAX_SIDE`` px on the long side (the page says when a photo is larger).

After burn-in the marginal is the running mean of (x + 1)/2 over every post-burn-in record and
chain. Before the run has draws, a marginal carried over from the previous run stands in for it
when the posterior is the same or its mirror image (``session``), and says so; otherwise the
mean of the current states is drawn, labelled as not a result, and nothing is offered for
download: an unsampled mask is never handed out.

The threshold lives in a plain Session State key (``page_state.SEG_THRESHOLD``) and is handed
to the slider as its value: a slider created without one takes its minimum (0.01) whenever the
browser mounts it afresh (a new page layout after an upload), which moved the threshold with the
captions still saying 0.50.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

import lsbcore
from app import colour_refits, large_builds, photo_downloads, state
from app.file_names import export_stem
from app.page_state import SEG_THRESHOLD, ensure
from app.text import grid_size
from app.views import pixels
from lsbcore.diagnostics.settled import STUCK_GAP, TOLERANCE, UNSETTLED_LIMIT
from lsbcore.segmentation import outputs
from lsbcore.segmentation.segment import overlay_at_size
from lsbcore.studies.figures import sampler_label as label

SIDE = 220
POOLED = "all samplers pooled"
CARRIED = "carried_marginal"  # run.cache: (marginal, sentence) from the previous run
PROBLEMS = "download_problems"  # run.cache: {button label: sentence} for builds that failed
# A running page redraws its buttons every second, and Streamlit forgets a button's file once
# it is redrawn: a click between two redraws (or during a slow build) lost its download.
WAIT_FOR_PAUSE = (
    "The photo's downloads are offered once the run is paused or finished: while it runs, the "
    "page redraws them every second, and a click between two redraws could lose its file."
)
UNSAMPLED = "mean of the current states: burn-in is still running, so this is not a result yet"
binary_entropy = outputs.binary_entropy
mask_png = outputs.mask_png


@dataclass
class Segmentation:
    observed: np.ndarray | None  # uint8 image
    marginal: np.ndarray  # uint8, P(x = +1) as gray
    overlay: np.ndarray  # uint8 RGB: mask tinted over the image
    uncertainty: np.ndarray  # uint8 RGB: entropy in bits, inferno
    mask: np.ndarray  # bool [H, W]
    accuracy: float | None
    object_fraction: float


def display(image: np.ndarray, side: int = SIDE) -> np.ndarray:
    return pixels.fit(image, side)


def segmentation_view(
    marginal: np.ndarray,
    image: np.ndarray | None = None,
    threshold: float = 0.5,
    truth: np.ndarray | None = None,
    side: int = SIDE,
) -> Segmentation | None:
    """Images for a marginal ``[H, W]`` in [0, 1]; ``image`` (grayscale [H, W] or RGB
    [H, W, 3] in [0, 1]) underlays the mask, ``truth`` (+-1) gives the accuracy. None for an
    empty marginal."""
    marginal = np.asarray(marginal, dtype=np.float64)
    if marginal.ndim != 2 or marginal.size == 0:
        return None
    mask = marginal >= threshold
    fits = image is not None and np.shape(image)[:2] == marginal.shape
    underlay = image if fits else marginal
    accuracy = None
    if truth is not None and np.shape(truth) == marginal.shape:
        accuracy = float(np.mean(mask == (np.asarray(truth) > 0)))
    observed = None
    if image is not None:
        observed = display(pixels.colour_image(image), side)
    return Segmentation(
        observed=observed,
        marginal=display(pixels.gray(marginal), side),
        overlay=display(pixels.overlay(underlay, mask), side),
        uncertainty=display(pixels.colour(binary_entropy(marginal), 0.0, 1.0, "inferno"), side),
        mask=mask,
        accuracy=accuracy,
        object_fraction=float(mask.mean()),
    )


def difference_image(mask: np.ndarray, map_mask: np.ndarray) -> np.ndarray:
    """Where the thresholded marginal and the MAP differ: object in both white, background in
    both black, marginal-only orange, MAP-only blue."""
    out = np.zeros((*mask.shape, 3), dtype=np.uint8)
    out[mask & map_mask] = 255
    out[mask & ~map_mask] = (240, 140, 30)
    out[~mask & map_mask] = (40, 120, 230)
    return out


def recorded_marginal(run, choice: str = POOLED) -> np.ndarray | None:
    """P(x = +1) from the run's own recorded draws (samplers pooled), None before it has any."""
    comparison = run.comparison
    names = comparison.names if choice == POOLED else [choice]
    with run.lock:
        estimates = [comparison.marginals[n] for n in names]
        if not all(m.count for m in estimates):
            return None
        return np.mean([m.mean() for m in estimates], axis=0)


def snapshot(run, choice: str = POOLED) -> tuple[np.ndarray, str, bool]:
    """The marginal to show, where it comes from, and whether it is sampled (a result)."""
    comparison = run.comparison
    marginal = recorded_marginal(run, choice)
    if marginal is not None:
        count = comparison.marginals[comparison.names[0]].count
        return marginal, f"posterior marginal from {count:,} records per chain", True
    carried = run.cache.get(CARRIED)
    if carried is not None and np.shape(carried[0]) == tuple(run.problem.target.shape):
        return carried[0], carried[1], True
    names = comparison.names if choice == POOLED else [choice]
    with run.lock:
        states = [comparison[n].x.cpu().numpy() for n in names]
    return np.mean([(x + 1) / 2 for x in states], axis=(0, 1)), UNSAMPLED, False


def exact_map(run) -> np.ndarray | None:
    """The image posterior's exact MAP (a minimum cut), once per run; None for paper cases,
    whose chains each have their own field."""
    target = run.problem.target
    if target.batch != 1:
        return None
    if "map" not in run.cache:
        run.cache["map"] = lsbcore.exact_map(target)[0].cpu().numpy() > 0
    return run.cache["map"]


def settled_text(run) -> tuple[str, bool | None]:
    """A sentence on whether the marginal has settled, and the verdict (None: not judged)."""
    if not state.judges_settling(run):
        if run.problem.target.batch > 1:
            return (
                "Settling is not judged here: every chain samples its own noisy α, so the "
                "chains' marginals are not meant to agree.",
                None,
            )
        return "Settling is judged across chains: run at least 2.", None
    if run.phase != "mixing":
        return "Settling is judged once burn-in is over.", None
    if colour_refits.pending(run):
        return (
            "Settling is judged once the colour refits are over: only the last field's draws "
            "make the result.",
            None,
        )
    if not run.settledness:
        state.refresh_settledness(run)
    if not run.settledness:
        return "Not enough draws yet to judge whether the marginal has settled.", None
    parts, verdicts = [], []
    for name, verdict in run.settledness.items():
        verdicts.append(verdict.settled)
        parts.append(f"{label(name)}: {verdict.reason[:-1]}")  # the rule: diagnostics.settled
    when = f" (at step {run.settled_at:,})" if run.settled_at is not None else ""
    head = "Settled" + when if all(verdicts) else "Not settled yet"
    return f"{head}. " + "; ".join(parts) + ".", all(verdicts)


def agreement_text(mask: np.ndarray, map_mask: np.ndarray) -> str:
    """How much of the mask the exact MAP agrees with: "every pixel", or a percentage with as
    many decimals as it takes not to read 100% (or 0%) while some pixels differ (or agree)."""
    differ = int((mask != map_mask).sum())
    if differ in (0, mask.size):
        return "on every pixel" if differ == 0 else "on no pixel"
    agree = 1.0 - differ / mask.size
    for digits in range(1, 10):  # 9 decimals tell one pixel in 10^11 from all of them
        share = f"{agree:.{digits}%}"
        if agree == 0.0 or float(share[:-1]) not in (0.0, 100.0):
            break
    return f"on {share} of the pixels ({differ:,} differ{'s' if differ == 1 else ''})"


def threshold_word(threshold: float) -> str:
    """The threshold in a mask's file name (``t0.5``): a mask at another threshold is
    another file."""
    return f"t{float(threshold):g}"


def mask_file_name(run, threshold: float) -> str:
    """A paper case's mask: the run's name (``export_stem``) and the threshold."""
    return f"{export_stem(run)}-mask-{threshold_word(threshold)}.png"


@dataclass(frozen=True)
class Download:
    """One download button: what it says, the file's name, and how the file is built."""

    key: str
    label: str
    file_name: str
    build: Callable[[], bytes]
    mime: str


def _guarded(run, label: str, build: Callable[[], bytes]) -> Callable[[], bytes]:
    """``build`` taking the server's one turn for large builds; a failure leaves its sentence
    in ``run.cache[PROBLEMS]`` for the page (Streamlit runs the build outside the script, so
    the page can only say so when it next draws)."""
    problems = run.cache.setdefault(PROBLEMS, {})

    def guarded() -> bytes:
        try:
            with large_builds.one_at_a_time():
                data = build()
        except large_builds.BuildBusy:
            problems[label] = f"{label} was not built: {large_builds.BUSY}."
            raise
        except Exception as err:
            problems[label] = (
                f"{label} could not be built ({err or type(err).__name__}); try again, or "
                "take the .npy array, which holds the same probabilities."
            )
            raise
        problems.pop(label, None)
        return data

    return guarded


def download_files(run, marginal: np.ndarray, threshold: float) -> list[Download]:
    """The photo's downloads: PNGs at its size, at most ``photo_downloads.MAX_SIDE`` px on the
    long side, upsampled from the lattice (one large build at a time on the server), and the
    lattice's P(x = +1) as ``.npy``."""
    photo, source = run.photo, run.source
    marginal = np.array(marginal, dtype=np.float64)  # as drawn now, whatever the run does next
    shape = photo_downloads.download_shape(photo.original_shape)
    height, width = shape
    big = f"{width}x{height}"
    stem = export_stem(run)  # the problem, its settings, a digest of them, the date

    def overlay() -> bytes:
        if source is None:  # no file to decode again: the working photo underlies the mask
            return overlay_at_size(None, marginal, photo, threshold)
        return photo_downloads.overlay_png(source, marginal, shape, threshold)

    pngs = {
        "mask": (f"Mask ({big})", lambda: photo_downloads.mask_png(marginal, shape, threshold)),
        "probability": (
            f"P(x = +1) ({big})",
            lambda: photo_downloads.probability_png(marginal, shape),
        ),
        "entropy": (f"Uncertainty ({big})", lambda: photo_downloads.entropy_png(marginal, shape)),
        "overlay": (f"Overlay ({big})", overlay),
    }

    def png_name(key: str) -> str:  # the threshold changes the mask and the overlay only
        word = f"-{threshold_word(threshold)}" if key in ("mask", "overlay") else ""
        return f"{stem}-{key}{word}-{big}.png"

    files = [
        Download(key, label, png_name(key), _guarded(run, label, build), "image/png")
        for key, (label, build) in pngs.items()
    ]
    files.append(
        Download(
            "npy",
            "P(x = +1) array (.npy)",
            f"{stem}-probability.npy",
            lambda: outputs.npy_bytes(marginal),
            "application/octet-stream",
        )
    )
    return files


def _downloads(run, marginal: np.ndarray, threshold: float) -> None:
    """The download buttons, what they hold, and any download that failed since."""
    for sentence in run.cache.get(PROBLEMS, {}).values():
        st.warning(sentence)
    if run.running:
        st.info(WAIT_FOR_PAUSE)
        return
    files = download_files(run, marginal, threshold)
    height, width = photo_downloads.download_shape(run.photo.original_shape)
    note = photo_downloads.cap_note(run.photo.original_shape)
    st.caption(
        f"Downloads: the PNGs are {grid_size(height, width)} px, upsampled (bilinear) from the "
        f"{grid_size(*marginal.shape)} lattice (width × height); the mask thresholds the upsampled "
        "probability, so its edge runs between lattice sites. The .npy array is P(x = +1) on "
        "the lattice itself." + (f" {note}" if note else "")
    )
    cols = st.columns(len(files))
    for col, file in zip(cols, files, strict=True):
        col.download_button(
            file.label,
            data=file.build,
            file_name=file.file_name,
            mime=file.mime,
            on_click="ignore",
            key=f"dl_{file.key}",
        )


def threshold_slider(container) -> float:
    """The threshold slider, given its value from ``SEG_THRESHOLD`` (see the module docstring)."""
    value = SEG_THRESHOLD.get()
    if not isinstance(value, float) or not 0.01 <= value <= 0.99:
        value = 0.5
    threshold = container.slider(
        "Threshold on P(x = +1)", 0.01, 0.99, value=value, step=0.01, key="seg_threshold"
    )
    SEG_THRESHOLD.set(float(threshold))
    return float(threshold)


def render(run) -> None:
    comparison = run.comparison
    options = [POOLED, *comparison.names]
    ensure("seg_sampler", POOLED, lambda v: v in options)
    left, right = st.columns(2)
    choice = left.selectbox(
        "Marginal from",
        options,
        format_func=lambda n: n if n == POOLED else label(n),
        key="seg_sampler",
    )
    threshold = threshold_slider(right)
    photo = run.photo
    if photo is not None:
        image = photo.rgb if photo.is_colour else photo.luma
    else:  # paper cases: the first chain's alpha stands for the observation
        alpha = run.problem.target.alpha[0].cpu().numpy()
        bound = max(float(np.abs(alpha).max()), 1e-12)
        image = (alpha / bound + 1) / 2
    truth = None if run.problem.truth is None else run.problem.truth.cpu().numpy()

    def build():
        marginal, source, sampled = snapshot(run, choice)
        return marginal, source, sampled, segmentation_view(marginal, image, threshold, truth)

    # a settled marginal changes little between redraws: rebuilt at most once a second while
    # running, so that the open tab costs the sampler little
    marginal, source, sampled, view = run.throttled("segmentation", build, (choice, threshold))
    if view is None:
        st.info("Nothing to segment yet.")
        return
    text, verdict = settled_text(run)
    {True: st.success, False: st.warning, None: st.info}[verdict](text)
    map_mask = exact_map(run)
    panels = [
        (view.observed, "observed image" if photo is not None else "α of chain 1 (scaled)"),
        (view.marginal, "P(x = +1): white = object"),
        (view.overlay, f"mask (P ≥ {threshold:.2f}) over it"),
        (view.uncertainty, "uncertainty: entropy, 0–1 bit"),
    ]
    if map_mask is not None:
        panels.append((display(pixels.spins(np.where(map_mask, 1, -1))), "exact MAP (min cut)"))
        panels.append(
            (
                display(difference_image(view.mask, map_mask)),
                "differs: orange marginal only, blue MAP only",
            )
        )
    with st.container(horizontal=True, gap="small"):  # the maps wrap on a narrow page
        for raster, caption in panels:
            st.image(pixels.data_uri(raster), caption=caption, width=raster.shape[1])
    summary = f"From the {source}. Object: {view.object_fraction:.1%} of the pixels."
    if view.accuracy is not None:
        summary += f" Accuracy against the ground truth: {view.accuracy:.1%}."
    if map_mask is not None:
        summary += (
            f" The mask agrees with the exact MAP {agreement_text(view.mask, map_mask)}. The MAP "
            "is the single likeliest segmentation; the mask is each pixel's likelier class under "
            "the marginal."
        )
    st.caption(summary)
    st.caption(
        f"Settled means: at {1 - UNSETTLED_LIMIT:.0%} of the sites P is known to within "
        f"±{TOLERANCE} (a 95% interval from the spread of the chains' latter draws), and the "
        f"chains, started apart, agree about the class of {1 - UNSETTLED_LIMIT:.0%} of the sites "
        f"(no two chains' P more than {STUCK_GAP} apart: a region stuck in one chain fails it)."
    )
    if not sampled:
        st.info(
            "Nothing to download yet: the mask is offered once the run has recorded draws "
            "(after burn-in). Press Run."
        )
        return
    if photo is None:
        st.download_button(
            "Download mask (PNG)",
            data=mask_png(view.mask),
            file_name=mask_file_name(run, threshold),
            mime="image/png",
            on_click="ignore",
            key="download_mask",
        )
        return
    _downloads(run, marginal, threshold)
