"""Regenerate the sample images in this folder.

    python assets/make_assets.py            # the synthetic image only (numpy + Pillow)
    python assets/make_assets.py --skimage  # also re-export the scikit-image photos

The synthetic image is deterministic: same seed, same bytes (for a given numpy and
Pillow). The photos come from scikit-image's bundled data (all CC0 / public domain,
see README.md); scikit-image is *not* a project dependency, so ``--skimage`` needs it
installed by hand, for example in a throwaway target directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

ASSETS = Path(__file__).resolve().parent
MAX_SIDE = 256

SYNTHETIC_NAME = "synthetic_disc_letter.png"
SYNTHETIC_SEED = 20240611


def make_synthetic(
    size: int = 128, noise_sd: float = 0.3, seed: int = SYNTHETIC_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """A dark disc and a dark letter "T" on a light background, plus Gaussian noise.

    Returns ``(image, mask)``: the noisy image as uint8 and the true foreground as a
    bool array. Object 0.3, background 0.7, noise sd 0.3 (before clipping to [0, 1]):
    thresholding each pixel alone misclassifies about a quarter of them at full size
    (about a tenth after the 2x box downscale to 64 px), which is what the Ising prior
    is there to clean up. The letter's bar is thinner than its stem, so it shows first
    what strong coupling does to fine structure.
    """
    yy, xx = np.mgrid[0:size, 0:size] / size  # coordinates in [0, 1)
    disc = (xx - 0.30) ** 2 + (yy - 0.50) ** 2 <= 0.20**2
    stem = (np.abs(xx - 0.74) <= 0.055) & (yy >= 0.28) & (yy <= 0.78)
    bar = (np.abs(yy - 0.28) <= 0.035) & (xx >= 0.56) & (xx <= 0.92)
    mask = disc | stem | bar

    clean = np.where(mask, 0.3, 0.7)
    rng = np.random.default_rng(seed)
    noisy = np.clip(clean + noise_sd * rng.standard_normal(clean.shape), 0.0, 1.0)
    return np.round(noisy * 255).astype(np.uint8), mask


def _save_png(arr: np.ndarray, name: str) -> Path:
    path = ASSETS / name
    Image.fromarray(arr).save(path, "PNG", optimize=True)
    return path


def _fit(im: Image.Image) -> Image.Image:
    """Downscale (box filter) so that the longer side is at most MAX_SIDE."""
    scale = MAX_SIDE / max(im.size)
    if scale >= 1:
        return im
    size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
    return im.resize(size, Image.Resampling.BOX)


def export_skimage_photos() -> list[Path]:
    """Re-export the CC0 / public-domain photos from scikit-image's bundled data."""
    from skimage import data  # optional, see the module docstring

    camera = Image.fromarray(data.camera())  # 512 x 512, kept at full size: the 512 px demo
    horse = Image.fromarray(data.horse().astype(np.uint8) * 255)  # bool: True = white
    # The cell sits in the lower right of a 550 x 660 frame: crop it (with some of the
    # banded background) so that it stays large after downscaling.
    cell = Image.fromarray(data.cell()).crop((250, 222, 550, 522))
    coffee = data.coffee()  # 600 x 400 RGB, kept at full size: the colour demo
    return [
        _save_png(np.asarray(camera), "camera.png"),
        _save_png(np.asarray(_fit(horse)), "horse.png"),
        _save_png(np.asarray(_fit(cell)), "cell.png"),
        _save_png(np.asarray(coffee), "coffee.png"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skimage", action="store_true", help="also re-export the scikit-image photos"
    )
    args = parser.parse_args()
    written = [_save_png(make_synthetic()[0], SYNTHETIC_NAME)]
    if args.skimage:
        written += export_skimage_photos()
    for path in written:
        print(f"{path.name}: {path.stat().st_size / 1000:.1f} kB")


if __name__ == "__main__":
    main()
