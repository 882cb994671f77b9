"""Regenerate the binarised handwritten digits and retrain the two shipped digit RBMs.

    python assets/make_digits.py              # digits.npz, then both models (about a minute each)
    python assets/make_digits.py --data-only  # digits.npz only

The digits are scikit-learn's bundled copy of the UCI "optical recognition of handwritten
digits" test set (1,797 images of 8 x 8 pixels, values 0..16; see README.md). scikit-learn is a
development requirement only: the library and the app read the binarised copy written here.

* 8 x 8: a pixel is on when its value is above half intensity (> 8 of 16).
* 16 x 16 and 28 x 28: each image is upsampled with a bicubic filter (Pillow, on the float
  values), then thresholded at the same half intensity, so strokes stay smooth rather than
  blocky. 28 x 28 is MNIST's size (the RBM and flow papers' digits), which is not available
  offline: these are the same 1,797 digits at that size, not MNIST.

The models are trained by ``lsbcore.rbm.train`` with the settings in ``SHIPPED`` (seeded: the
same library version gives the same weights).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

ASSETS = Path(__file__).resolve().parent
ROOT = ASSETS.parent
DIGITS_FILE = ASSETS / "digits.npz"
HALF = 8.0  # half of the digits' 0..16 intensity range

# name -> (output file, training settings)
SHIPPED = {
    "digits-8x8": (
        ASSETS / "rbm_digits_8x8.npz",
        dict(size=8, n_hidden=50, epochs=500, batch_size=100, lr=0.05, seed=0),
    ),
    "digits-16x16": (
        ASSETS / "rbm_digits_16x16.npz",
        # 500 persistent chains: with 100 the model drew a 4 about half the time
        dict(size=16, n_hidden=100, epochs=200, batch_size=100, lr=0.05, seed=0, n_persistent=500),
    ),
    # the LSB paper's RBM size (784 x 250, section 5.2), on the digits upsampled to MNIST's size
    "digits-28x28": (
        ASSETS / "rbm_digits_28x28.npz",
        dict(size=28, n_hidden=250, epochs=200, batch_size=100, lr=0.05, seed=0, n_persistent=500),
    ),
}


def upsample(image: np.ndarray, size: int) -> np.ndarray:
    """An 8 x 8 image of 0..16 values resized to ``size`` x ``size`` by a bicubic filter."""
    picture = Image.fromarray(image.astype(np.float32), mode="F")
    return np.asarray(picture.resize((size, size), Image.Resampling.BICUBIC), dtype=np.float64)


def make_digits() -> None:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = bunch.images  # [1797, 8, 8] of 0..16
    labels = bunch.target.astype(np.uint8)
    small = (images > HALF).reshape(len(images), -1)
    upsampled = {
        f"bits_{size}": np.packbits(
            np.stack([upsample(image, size) > HALF for image in images]).reshape(len(images), -1),
            axis=1,
        )
        for size in (16, 28)
    }
    np.savez_compressed(DIGITS_FILE, labels=labels, bits_8=np.packbits(small, axis=1), **upsampled)
    print(f"wrote {DIGITS_FILE.relative_to(ROOT)}: {len(images)} digits", file=sys.stderr)


def make_models(only: str | None = None) -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    # the matrices are small: one thread is as fast, and far faster on a busy machine
    torch.set_num_threads(1)
    from lsbcore.rbm.data import digits
    from lsbcore.rbm.models import save_model
    from lsbcore.rbm.train import progress_bar, train

    for name, (path, settings) in SHIPPED.items():
        if only is not None and name != only:
            continue
        settings = dict(settings)
        size = settings.pop("size")
        images, _ = digits(size)
        started = time.perf_counter()
        result = train(images, shape=(size, size), progress=progress_bar(name), **settings)
        seconds = time.perf_counter() - started
        last = result.history[-1]
        save_model(
            result.model,
            path,
            name=name,
            data=f"scikit-learn digits, binarised at {size} x {size}",
            **settings,
        )
        print(
            f"wrote {path.relative_to(ROOT)} in {seconds:.0f} s; last epoch: "
            + ", ".join(f"{key} {value:.4g}" for key, value in last.items() if value is not None),
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-only", action="store_true", help="write digits.npz only")
    parser.add_argument("--only", choices=tuple(SHIPPED), help="retrain this model only")
    args = parser.parse_args(argv)
    make_digits()
    if not args.data_only:
        make_models(args.only)


if __name__ == "__main__":
    main()
