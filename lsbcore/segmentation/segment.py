"""``segment``: a photo in, its segmentation out, at the photo's size, with honest uncertainty.

The photo is decoded and scaled down to a working lattice (longer side ``max_side``), a
two-class model is fitted to it (``fit_data_term``), and the Ising posterior of that field
with coupling ``lam`` is sampled, by default with checkerboard block Gibbs (one step is a
sweep). Chains start apart (``start``), and the run goes on until the per-site marginal has
settled by split R-hat (``diagnostics.settled``), or for exactly ``sweeps`` sweeps when given.
``P(x = +1)`` is the mean over the latter draws (the ones the settled verdict looked at), and
the exact MAP (a minimum cut) comes with it for comparison.

With a prompt (``box``, ``points``: ``segmentation.prompt``) the field comes from colour models
of the object and the background fitted to the regions the prompt marks (``prompted``). While
the run goes on, every ``REFIT_SWEEPS`` sweeps the models are refitted from the marginal of the
sweeps since the last refit (soft GrabCut iterations, ``refit_schedule``), up to ``refits``
times and until a refit moves the mask by less than ``REFIT_STABLE`` of the free sites; then the
last field is sampled until it settles. A refit changes the target, so the settled verdict
starts again after it (only draws of the final target make the result) while the chains go
on from where they are and the sweep count keeps counting.
"""

from __future__ import annotations

import io
import operator
import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from lsbcore.diagnostics.rao_blackwell import site_probabilities
from lsbcore.diagnostics.settled import BlockSums, Settledness
from lsbcore.image import MAX_BYTES, MAX_SIDE_LIMIT, Photo, load_photo
from lsbcore.samplers.interface import steps_per_sweep
from lsbcore.samplers.registry import REGISTRY, make_sampler
from lsbcore.segmentation import outputs
from lsbcore.segmentation.contrast import contrast_scale
from lsbcore.segmentation.data_term import DataTerm, fit_data_term
from lsbcore.segmentation.map_estimate import exact_map
from lsbcore.segmentation.prompt import make_prompt
from lsbcore.segmentation.prompted import PromptedDataTerm, fit_prompted_data_term
from lsbcore.segmentation.starts import STARTS, photo_starts
from lsbcore.targets.ising import BOUNDARIES, IsingPosterior

__all__ = [
    "MAX_SWEEPS",
    "REFITS",
    "REFIT_STABLE",
    "REFIT_SWEEPS",
    "SegmentationResult",
    "refit_moved",
    "refit_settled",
    "refits_left",
    "segment",
]

MAX_SWEEPS = 5000  # sweeps=None stops here if the marginal has not settled by then
MIN_SWEEPS = 100  # ... and never before this
MAX_SIDE = (8, 1024)  # working lattice: longer side
MAX_CHAINS = 64
REFIT_SWEEPS = 20  # sweeps between refits while a prompted run goes on
REFIT_STABLE = 0.005  # refits stop once one moves the mask by less than this share of sites
REFITS = 8  # refits of a prompted run at most
_LUMA = np.array([0.299, 0.587, 0.114])  # BT.601, as load_image


@dataclass(frozen=True)
class SegmentationResult:
    """A settled (or not) segmentation of one photo; arrays at the photo's size unless named
    ``working_*`` (the sampled lattice)."""

    target: IsingPosterior  # the posterior sampled: its ``alpha`` and ``lam``
    data: DataTerm | PromptedDataTerm  # the fitted model (with a prompt: its regions)
    photo: Photo
    working_probability: np.ndarray  # [h, w]: P(x = +1) from the latter draws, chains pooled
    map_mask: np.ndarray  # [h, w] bool: the exact MAP (minimum cut), object True
    settledness: Settledness
    sampler: str
    sweeps: int
    n_chains: int
    timings: dict[str, float]  # wall seconds: "fit" (data model), "sampling", "map"
    source: object = field(default=None, repr=False)  # the input, re-readable (full size)
    rounds: tuple[int, ...] = ()  # sweeps of each round (more than one: refits of a prompt)

    @property
    def settled(self) -> bool:
        return self.settledness.settled

    @property
    def working_mask(self) -> np.ndarray:
        """[h, w] bool: object where P(x = +1) >= 1/2 (the marginal's mode, site by site)."""
        return self.working_probability >= 0.5

    @property
    def working_entropy(self) -> np.ndarray:
        """[h, w]: the marginal's binary entropy in bits (1 = a coin flip)."""
        return outputs.binary_entropy(self.working_probability)

    @property
    def map_agreement(self) -> float:
        """Fraction of the working sites where the thresholded marginal equals the MAP."""
        return float(np.mean(self.working_mask == self.map_mask))

    @cached_property
    def probability(self) -> np.ndarray:
        """P(x = +1) at the photo's size: the working marginal upsampled bilinearly."""
        return outputs.upsample(self.working_probability, self.photo.original_shape)

    @property
    def mask(self) -> np.ndarray:
        """The object at the photo's size: the upsampled marginal at least 1/2 (so its edge
        follows the marginal between working pixels rather than their blocks)."""
        return self.probability >= 0.5

    @property
    def entropy(self) -> np.ndarray:
        return outputs.binary_entropy(self.probability)

    def overlay_png(self) -> bytes:
        """The mask over the photo, at the photo's size (``overlay_at_size``)."""
        return overlay_at_size(self.source, self.working_probability, self.photo)

    def files(self) -> dict[str, bytes]:
        """Every output as file contents: PNGs at the photo's size, ``.npy`` on the lattice."""
        return {
            "mask.png": outputs.mask_png(self.mask),
            "probability.png": outputs.probability_png(self.probability),
            "entropy.png": outputs.entropy_png(self.probability),
            "overlay.png": self.overlay_png(),
            "map_mask.png": outputs.mask_png(self.map_mask),
            "working_probability.npy": outputs.npy_bytes(self.working_probability),
            "working_mask.npy": outputs.npy_bytes(self.working_mask),
            "alpha.npy": outputs.npy_bytes(self.target.alpha[0].numpy()),
        }

    def save(self, folder) -> list[Path]:
        """Write ``files()`` into ``folder`` (created if missing); return the paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, data in self.files().items():
            path = folder / name
            path.write_bytes(data)
            paths.append(path)
        return paths


def _integer(value, name: str, low: int, high: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    try:
        value = operator.index(value)  # ints and numpy integers, not floats
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}.") from None
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {value}.")
    return value


def _photo_from_array(array: np.ndarray, max_side: int) -> Photo:
    """A ``Photo`` from an array: [H, W] gray or [H, W, 3] RGB, float in [0, 1] or integers."""
    if array.dtype == bool:
        array = array.astype(np.float64)
    elif np.issubdtype(array.dtype, np.integer):
        top = 255 if array.dtype == np.uint8 else 65535
        if array.size and (array.min() < 0 or array.max() > top):
            raise ValueError(f"integer image values must lie in [0, {top}].")
        array = array / top
    elif not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"image must hold numbers, got dtype {array.dtype}.")
    array = np.asarray(array, dtype=np.float64)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] != 3) or not array.size:
        raise ValueError(f"image must be [H, W] or [H, W, 3], got shape {array.shape}.")
    if not np.isfinite(array).all() or array.min() < 0 or array.max() > 1:
        raise ValueError("image values must be finite and within [0, 1].")
    height, width = array.shape[:2]
    longer = max(height, width)
    size = (width, height)
    if longer > max_side:
        size = tuple(max(1, round(side * max_side / longer)) for side in (width, height))
    channels = [array] if array.ndim == 2 else [array[..., c] for c in range(3)]
    resized = [
        np.asarray(Image.fromarray(c.astype(np.float32), "F").resize(size, Image.Resampling.BOX))
        for c in channels
    ]
    rgb = np.clip(np.stack(resized * 3 if len(resized) == 1 else resized, -1), 0, 1)
    rgb = rgb.astype(np.float64)
    is_colour = array.ndim == 3 and not (
        np.array_equal(array[..., 0], array[..., 1])
        and np.array_equal(array[..., 1], array[..., 2])
    )
    return Photo(
        rgb=rgb,
        luma=np.clip(rgb @ _LUMA, 0.0, 1.0),
        original_shape=(height, width),
        is_colour=is_colour,
    )


def overlay_at_size(source, working_probability, photo: Photo, threshold: float = 0.5) -> bytes:
    """The mask (``working_probability`` upsampled, at least ``threshold``) over the photo,
    decoded again from ``source`` at its own size, as an RGB PNG.

    Photos longer than the decoder's largest ``max_side`` (4096 px) are drawn at that size;
    without a re-readable source the working lattice stands in for the photo.
    """
    longer = max(photo.original_shape)
    if source is None:
        full = photo
    else:
        full = read_photo(source, min(longer, MAX_SIDE_LIMIT))
    underlay = full.rgb if full.is_colour else full.luma
    probability = outputs.upsample(working_probability, underlay.shape[:2])
    return outputs.overlay_png(underlay, probability >= threshold)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _rereadable(image):
    """A file object's bytes (it can be read only once); any other input as it is."""
    getvalue = getattr(image, "getvalue", None)
    if callable(getvalue):
        return getvalue()
    if hasattr(image, "read") and not isinstance(image, Image.Image):
        return image.read(MAX_BYTES + 1)
    return image


def read_photo(image, max_side: int) -> Photo:
    """``image`` (a path, bytes, a binary file, a PIL image or an array) as a ``Photo``.

    PIL images and 8-bit arrays go through the file decoder (as a lossless PNG), so a photo
    gives the same lattice whichever way it is handed over; other arrays are scaled here.
    """
    if isinstance(image, Photo):
        return image
    if isinstance(image, Image.Image):
        if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
            image = image.convert("RGB")
        return load_photo(_png(image), max_side=max_side)
    if isinstance(image, np.ndarray | torch.Tensor):
        array = image.detach().cpu().numpy() if isinstance(image, torch.Tensor) else image
        if array.dtype == np.uint8 and (array.ndim == 2 or array.shape[-1:] == (3,)):
            return load_photo(_png(Image.fromarray(np.ascontiguousarray(array))), max_side)
        return _photo_from_array(array, max_side)
    if isinstance(image, str | os.PathLike | bytes | bytearray | memoryview) or hasattr(
        image, "read"
    ):
        return load_photo(image, max_side=max_side)
    raise TypeError(
        "image must be a path, bytes, a binary file, a PIL image or an array, "
        f"not {type(image).__name__}."
    )


def segment(
    image,
    lam: float = 1.0,
    mu: float = 1.0,
    sigma: float = 1.0,
    polarity: str = "auto",
    max_side: int = 256,
    sampler: str = "checkerboard",
    sweeps: int | None = None,
    n_chains: int = 4,
    start: str = "mixed",
    seed: int = 0,
    boundary: str = "free",
    max_sweeps: int = MAX_SWEEPS,
    box=None,
    points=None,
    refits: int = REFITS,
    sampler_options: dict | None = None,
    contrast: bool = False,
    hard_refits: bool = False,
) -> SegmentationResult:
    """Segment ``image`` into object (+1) and background (-1) under an Ising prior.

    Args:
        image: a path, bytes, a binary file, a PIL image, or an array ([H, W] gray or
            [H, W, 3] RGB; floats in [0, 1], uint8 or uint16).
        lam: coupling (smoothness prior), >= 0.
        mu, sigma, polarity: the data model (``fit_data_term``): mu weights the fitted
            likelihood, sigma widens its classes, polarity says which class is the object
            ("auto": the one touching the border less, "dark" or "bright").
        max_side: longer side of the working lattice (the photo is scaled down to it).
        sampler: any registered sampler that needs no loaded function; learned ones learn
            during the first half of the run.
        sweeps: run exactly this many sweeps; None runs until the marginal has settled (at
            least ``MIN_SWEEPS``, at most ``max_sweeps``).
        n_chains: chains per run (at least 2, so that settling can be judged).
        start: "mixed", "data" or "random" (``segmentation.starts``).
        box: the object's box ``(left, top, right, bottom)`` as fractions of the photo's
            width and height; outside it is background (``segmentation.prompt``).
        points: ``(x, y, label)`` fractions with label +1 (object) or -1 (background).
        refits: with a prompt, at most how many times the colour models are refitted from
            the marginal while the run goes on (every ``REFIT_SWEEPS`` sweeps, until a refit
            leaves the mask as it was); the last field is then sampled for ``sweeps`` sweeps,
            or until settled. The result's ``sweeps`` counts all rounds and ``rounds`` each.
        sampler_options: the sampler's registry options (``neural-block``'s ``block_size`` and
            ``weights``, for example), checked by ``make_sampler``.
        contrast: contrast-sensitive smoothing (``segmentation.contrast``): each edge weighs
            ``lam * exp(-beta |y_i - y_j|^2)`` in the working lattice's colours, so ``lam`` is
            the coupling between like colours. Off by default: on the box benchmark it did not
            raise the agreement with hand masks (``BENCHMARKS.md``).
        hard_refits: refit a prompt's colour models from the marginal's labels (P > 1/2), as
            GrabCut does, instead of its probabilities.
    """
    max_side = _integer(max_side, "max_side", *MAX_SIDE)
    n_chains = _integer(n_chains, "n_chains", 2, MAX_CHAINS)
    seed = _integer(seed, "seed", 0, 2**63 - 1)
    max_sweeps = _integer(max_sweeps, "max_sweeps", MIN_SWEEPS, 1_000_000)
    if sweeps is not None:
        sweeps = _integer(sweeps, "sweeps", 8, 1_000_000)
    if sampler not in REGISTRY or REGISTRY[sampler].needs_balancing:
        usable = [n for n, s in REGISTRY.items() if not s.needs_balancing]
        raise ValueError(f"sampler must be one of {', '.join(usable)}, got {sampler!r}.")
    if sampler_options is not None and not isinstance(sampler_options, dict):
        raise ValueError(
            f"sampler_options must be a dict of the sampler's options, got "
            f"{type(sampler_options).__name__}."
        )
    if start not in STARTS:
        raise ValueError(f"start must be one of {', '.join(STARTS)}, got {start!r}.")
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {', '.join(BOUNDARIES)}, got {boundary!r}.")
    prompt = make_prompt(box, points)
    refits = _integer(refits, "refits", 0, 50)
    for name, flag in (("contrast", contrast), ("hard_refits", hard_refits)):
        if not isinstance(flag, bool | np.bool_):
            raise ValueError(f"{name} must be True or False, got {flag!r}.")
    if prompt is not None and polarity != "auto":
        raise ValueError(
            "polarity does not apply with a box or points: the prompt says what the object is."
        )

    t0 = time.perf_counter()
    image = _rereadable(image)
    photo = read_photo(image, max_side)
    if prompt is None:
        data = fit_data_term(photo, mu=mu, sigma=sigma, polarity=polarity)
    else:
        data = fit_prompted_data_term(photo, prompt, mu=mu, sigma=sigma)
    timings = {"fit": time.perf_counter() - t0, "sampling": 0.0}
    x0 = photo_starts(data.alpha, n_chains, start, seed)
    options = sampler_options or {}
    scale = contrast_scale(photo.rgb, boundary) if contrast else None
    rounds, moved = [], None
    while True:
        target = IsingPosterior(data.alpha, lam, boundary=boundary, edge_scale=scale)
        last = prompt is None or not refits_left(data.refits, moved, refits)
        t0 = time.perf_counter()
        chain, blocks, verdict, done = _sample_until_settled(
            target, sampler, n_chains, (seed + len(rounds)) % 2**63, x0,
            sweeps if last else REFIT_SWEEPS, max_sweeps, options,
        )  # fmt: skip
        timings["sampling"] += time.perf_counter() - t0
        rounds.append(done)
        x0 = chain.x.detach().clone()  # the next round goes on from where the chains are
        if last:
            break
        # soft GrabCut: refit the colour models from this round's marginal (a new target)
        t0 = time.perf_counter()
        marginal = blocks.window_mean()
        if hard_refits:
            marginal = (marginal > 0.5).astype(np.float64)
        data, before = data.refit(marginal), data
        moved = refit_moved(before.alpha, data.alpha, data.regions.free)
        timings["fit"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    map_mask = exact_map(target)[0].numpy() > 0
    timings["map"] = time.perf_counter() - t0
    return SegmentationResult(
        target=target,
        data=data,
        photo=photo,
        working_probability=blocks.window_mean(),
        map_mask=map_mask,
        settledness=verdict,
        sampler=sampler,
        sweeps=sum(rounds),
        n_chains=n_chains,
        timings=timings,
        source=image,
        rounds=tuple(rounds),
    )


def refit_moved(before: np.ndarray, after: np.ndarray, free: np.ndarray) -> float:
    """The share of the free sites at which a refit flipped the field's sign (``before`` to
    ``after``): how far it moved the segmentation."""
    changed = np.count_nonzero(((before >= 0) != (after >= 0)) & free)
    return changed / max(np.count_nonzero(free), 1)


def refit_settled(before: np.ndarray, after: np.ndarray, free: np.ndarray) -> bool:
    """Whether a refit moved the field's sign at fewer than ``REFIT_STABLE`` of the free
    sites: the colour models have stopped changing the segmentation."""
    return refit_moved(before, after, free) < REFIT_STABLE


def refits_left(done: int, moved: float | None, refits: int = REFITS) -> bool:
    """Whether a prompted run refits its colour models again: it has refitted ``done`` times,
    fewer than ``refits``, and the last refit moved (``refit_moved``; None before any) at
    least ``REFIT_STABLE`` of the free sites. Otherwise the last field is sampled to the end."""
    return done < refits and (moved is None or moved >= REFIT_STABLE)


def _sample_until_settled(
    target, sampler, n_chains, seed, x0, sweeps, max_sweeps, options, device="cpu"
):
    """Sample ``target`` from ``x0``: exactly ``sweeps`` sweeps, or until the marginal has
    settled (at least MIN_SWEEPS, at most ``max_sweeps``). Returns the sampler, the block
    sums of its draws, the last verdict and the sweeps run. ``device``: the CPU for
    ``segment``; the GPU benchmark (``lsbcore.studies.benchmarks.gpu``) times CUDA too."""
    chain = make_sampler(sampler, target, n_chains, seed=seed, device=device, x0=x0, **options)
    per_sweep = steps_per_sweep(chain)
    blocks = BlockSums()
    done, verdict = 0, None
    planned = sweeps if sweeps is not None else max_sweeps
    while done < planned:
        learn = chain.learnable and done < planned // 2
        if chain.learnable and done == planned // 2:
            chain.balancing.frozen()  # learned during the first half, frozen for the rest
        chain.step(per_sweep, learn=learn)
        done += 1
        blocks.add(site_probabilities(chain), 1)  # Rao-Blackwellised: P(x_i = +1 | x_-i)
        if sweeps is None and blocks.n_closed and blocks.count == sum(blocks.block_counts):
            verdict = blocks.settledness()  # a block just closed: judge again
            if done >= MIN_SWEEPS and verdict is not None and verdict.settled:
                break
    return chain, blocks, blocks.settledness(), done
