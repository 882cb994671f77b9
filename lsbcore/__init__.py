"""lsbcore: exact, fast locally balanced MCMC samplers for the Ising segmentation posterior."""

from lsbcore.balancing import FIXED, Balancing, make_balancing
from lsbcore.balancing_io import (
    balancing_to_dict,
    balancing_to_json,
    load_balancing,
    save_balancing,
)
from lsbcore.cases import PAPER_CASES, Problem, image_problem, paper_case, square_truth
from lsbcore.comparison import Comparison
from lsbcore.factory import DESCRIPTIONS, SAMPLERS, make_sampler
from lsbcore.image import ImageError, load_image
from lsbcore.ising import IsingPosterior
from lsbcore.mixing import (
    MixingSummary,
    autocorrelation,
    ess_bulk,
    ess_from_autocorrelation,
    ess_paper,
    rhat,
    summarise_mixing,
)
from lsbcore.sampler import resolve_device, uniform_start
from lsbcore.trace import (
    CSV_COLUMNS,
    PHASES,
    MarginalEstimate,
    Trace,
    accuracy,
    magnetisation,
    write_traces_csv,
)

__all__ = [
    "CSV_COLUMNS",
    "DESCRIPTIONS",
    "FIXED",
    "PAPER_CASES",
    "PHASES",
    "SAMPLERS",
    "Balancing",
    "Comparison",
    "balancing_to_dict",
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
    "ess_bulk",
    "ess_from_autocorrelation",
    "ess_paper",
    "load_image",
    "magnetisation",
    "make_balancing",
    "make_sampler",
    "paper_case",
    "resolve_device",
    "image_problem",
    "rhat",
    "square_truth",
    "summarise_mixing",
    "uniform_start",
    "write_traces_csv",
]
