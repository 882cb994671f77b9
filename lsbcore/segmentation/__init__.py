"""Segmentation data models for photos: colour, two-class mixture, polarity, Ising field.

Pipeline: features (luma, or Lab colour) -> two Gaussian classes fitted by EM
(``mixture``) -> which class is the object (``polarity``) -> the field ``alpha`` of the
Ising posterior (``data_term``).
"""

from lsbcore.segmentation.colour import srgb_to_lab
from lsbcore.segmentation.data_term import (
    ALPHA_BOUND,
    POLARITIES,
    DataTerm,
    fit_data_term,
    image_features,
)
from lsbcore.segmentation.mixture import (
    VARIANCE_FLOOR,
    TwoClassModel,
    fit_two_class_model,
    otsu_threshold,
)
from lsbcore.segmentation.polarity import CLASS_NAMES, Polarity, border_polarity

__all__ = [
    "ALPHA_BOUND",
    "CLASS_NAMES",
    "POLARITIES",
    "VARIANCE_FLOOR",
    "DataTerm",
    "Polarity",
    "TwoClassModel",
    "border_polarity",
    "fit_data_term",
    "fit_two_class_model",
    "image_features",
    "otsu_threshold",
    "srgb_to_lab",
]
