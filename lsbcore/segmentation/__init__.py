"""Segmenting photos: the data model, the starts, the exact MAP, the outputs, ``segment``.

Pipeline: features (luma, or Lab colour) -> two Gaussian classes fitted by EM (``mixture``)
-> which class is the object (``polarity``) -> the field ``alpha`` of the Ising posterior
(``data_term``) -> chains from ``starts`` until the marginal has settled, and the exact MAP by
a minimum cut (``map_estimate``) -> images and arrays at the photo's size (``outputs``).
``segment`` does it all in one call. With a prompt (a box around the object, object and
background points: ``prompt``) the field comes instead from a mixture per class fitted to the
regions it marks and refitted from the marginal (``class_mixture``, ``prompted``).
"""

from lsbcore.segmentation.class_mixture import ClassMixture, fit_class_mixture
from lsbcore.segmentation.colour import srgb_to_lab
from lsbcore.segmentation.data_term import (
    ALPHA_BOUND,
    POLARITIES,
    DataTerm,
    fit_data_term,
    image_features,
)
from lsbcore.segmentation.map_estimate import exact_map
from lsbcore.segmentation.mixture import (
    VARIANCE_FLOOR,
    TwoClassModel,
    fit_two_class_model,
    otsu_threshold,
)
from lsbcore.segmentation.outputs import (
    binary_entropy,
    entropy_png,
    mask_png,
    npy_bytes,
    overlay_png,
    probability_png,
    upsample,
)
from lsbcore.segmentation.polarity import (
    CLASS_NAMES,
    Polarity,
    border_polarity,
    labels_polarity,
)
from lsbcore.segmentation.prompt import Prompt, PromptRegions, make_prompt
from lsbcore.segmentation.prompted import PromptedDataTerm, fit_prompted_data_term
from lsbcore.segmentation.segment import SegmentationResult, segment
from lsbcore.segmentation.starts import START_LABELS, STARTS, photo_starts

__all__ = [
    "ALPHA_BOUND",
    "CLASS_NAMES",
    "POLARITIES",
    "STARTS",
    "START_LABELS",
    "VARIANCE_FLOOR",
    "ClassMixture",
    "DataTerm",
    "Polarity",
    "Prompt",
    "PromptRegions",
    "PromptedDataTerm",
    "SegmentationResult",
    "TwoClassModel",
    "binary_entropy",
    "border_polarity",
    "entropy_png",
    "exact_map",
    "fit_class_mixture",
    "fit_data_term",
    "fit_prompted_data_term",
    "fit_two_class_model",
    "image_features",
    "labels_polarity",
    "make_prompt",
    "mask_png",
    "npy_bytes",
    "otsu_threshold",
    "overlay_png",
    "photo_starts",
    "probability_png",
    "segment",
    "srgb_to_lab",
    "upsample",
]
