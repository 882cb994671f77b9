"""OpenCV's GrabCut on lattices from ``tools.grabcut_reference``, in an interpreter of its own.

    python grabcut_cv.py IN.npz OUT.npz ITERATIONS

Needs only numpy and opencv (``opencv-python-headless``), not the product's packages. ``IN``
holds ``<name>.rgb`` (uint8 ``[H, W, 3]``) and ``<name>.box`` (left, top, right, bottom as
fractions); ``OUT`` gets ``<name>``: the definite and probable foreground, uint8 0/1.
"""

import sys

import cv2
import numpy as np


def grabcut(rgb: np.ndarray, box: np.ndarray, iterations: int) -> np.ndarray:
    height, width = rgb.shape[:2]
    left, top = int(round(box[0] * width)), int(round(box[1] * height))
    right, bottom = int(round(box[2] * width)), int(round(box[3] * height))
    # OpenCV's rectangle must leave a pixel of background: the box, less its outer pixel row
    right, bottom = min(right, width - 1), min(bottom, height - 1)
    rect = (left, top, max(right - left, 1), max(bottom - top, 1))
    mask = np.zeros((height, width), np.uint8)
    background, foreground = np.zeros((1, 65)), np.zeros((1, 65))
    image = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    cv2.grabCut(image, mask, rect, background, foreground, iterations, cv2.GC_INIT_WITH_RECT)
    return ((mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)).astype(np.uint8)


def main() -> None:
    source, target, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with np.load(source) as arrays:
        names = sorted({key.rsplit(".", 1)[0] for key in arrays.files})
        masks = {n: grabcut(arrays[f"{n}.rgb"], arrays[f"{n}.box"], iterations) for n in names}
    np.savez(target, **masks)


if __name__ == "__main__":
    main()
