"""lsbcore: exact, fast MCMC samplers for binary targets: the Ising segmentation posterior, any
pairwise binary network, restricted Boltzmann machines and factor graphs
(``docs/architecture.md``)."""

from lsbcore import catalogue as _catalogue  # noqa: F401  (first: registers the methods)
from lsbcore.backends import BACKENDS
from lsbcore.balancing.functions import FIXED, Balancing, make_balancing
from lsbcore.balancing.json_io import (
    balancing_to_dict,
    balancing_to_json,
    load_balancing,
    save_balancing,
)
from lsbcore.balancing.monotone import MonotoneBalancing
from lsbcore.cases import PAPER_CASES, Problem, image_problem, paper_case, square_truth
from lsbcore.comparison import Comparison
from lsbcore.diagnostics.mixing import (
    MixingSummary,
    autocorrelation,
    ess_bulk,
    ess_bulk_per_chain,
    ess_from_autocorrelation,
    ess_paper,
    rhat,
    summarise_mixing,
)
from lsbcore.diagnostics.mmd import mmd
from lsbcore.diagnostics.trace import (
    CSV_COLUMNS,
    PHASES,
    MarginalEstimate,
    Trace,
    accuracy,
    magnetisation,
    write_traces_csv,
)
from lsbcore.image import ImageError, Photo, load_image, load_photo
from lsbcore.samplers.base import resolve_device, uniform_start
from lsbcore.samplers.config import SamplerConfig
from lsbcore.samplers.registry import (
    DESCRIPTIONS,
    REGISTRY,
    SAMPLERS,
    make_sampler,
    samplers_for,
)
from lsbcore.segmentation import (
    DataTerm,
    Prompt,
    PromptedDataTerm,
    SegmentationResult,
    TwoClassModel,
    binary_entropy,
    entropy_png,
    exact_map,
    fit_data_term,
    fit_prompted_data_term,
    make_prompt,
    mask_png,
    npy_bytes,
    otsu_threshold,
    overlay_png,
    photo_starts,
    probability_png,
    segment,
    srgb_to_lab,
    upsample,
)
from lsbcore.targets.base import Target
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.pairwise import PairwiseMRF
from lsbcore.targets.pairwise_target import PairwiseTarget
from lsbcore.targets.rbm import RBM
from lsbcore.targets.uai import UAIModel, read_uai, read_uai_upload

__all__ = [
    "mmd",
    "BACKENDS",
    "REGISTRY",
    "PairwiseMRF",
    "PairwiseTarget",
    "RBM",
    "FactorGraph",
    "grid_network",
    "read_uai",
    "read_uai_upload",
    "UAIModel",
    "Target",
    "CSV_COLUMNS",
    "DESCRIPTIONS",
    "FIXED",
    "PAPER_CASES",
    "PHASES",
    "SAMPLERS",
    "Balancing",
    "MonotoneBalancing",
    "Comparison",
    "SamplerConfig",
    "balancing_to_dict",
    "binary_entropy",
    "entropy_png",
    "exact_map",
    "mask_png",
    "npy_bytes",
    "overlay_png",
    "probability_png",
    "upsample",
    "balancing_to_json",
    "load_balancing",
    "save_balancing",
    "ImageError",
    "IsingPosterior",
    "MarginalEstimate",
    "MixingSummary",
    "Problem",
    "Trace",
    "accuracy",
    "autocorrelation",
    "ess_bulk_per_chain",
    "ess_bulk",
    "ess_from_autocorrelation",
    "ess_paper",
    "load_image",
    "load_photo",
    "Photo",
    "SegmentationResult",
    "photo_starts",
    "segment",
    "DataTerm",
    "TwoClassModel",
    "fit_data_term",
    "Prompt",
    "PromptedDataTerm",
    "fit_prompted_data_term",
    "make_prompt",
    "otsu_threshold",
    "srgb_to_lab",
    "magnetisation",
    "make_balancing",
    "make_sampler",
    "samplers_for",
    "paper_case",
    "resolve_device",
    "image_problem",
    "rhat",
    "square_truth",
    "summarise_mixing",
    "uniform_start",
    "write_traces_csv",
]
