"""The RBM beside its target (``lsbcore.targets.rbm``): digit data, trained models, PCD training,
likelihoods, ground truth and the live comparison. The paper's study of it is
``lsbcore.studies.rbm``."""

import warnings

from lsbcore.diagnostics.mmd import log_mmd, mmd
from lsbcore.rbm.data import (
    MAX_FILE_BYTES,
    MAX_ROWS,
    MAX_VISIBLE,
    digits,
    load_binary_data,
)
from lsbcore.rbm.ground_truth import affordable_steps, floor_draws, ground_truth, noise_floor
from lsbcore.rbm.likelihood import (
    ais_log_partition,
    baseline_log_likelihood,
    exact_log_likelihood,
    exact_log_partition,
    pseudo_log_likelihood,
)
from lsbcore.rbm.live import RBMComparison
from lsbcore.rbm.models import MODELS, load_model, read_meta, save_model
from lsbcore.rbm.train import MAX_TRAINING_SECONDS, Training, progress_bar, train
from lsbcore.rbm.variants import LABELS, VARIANTS, describe, display_name, evals_per_step

# ``python -m lsbcore.rbm.train`` imports this package, which imports the training module, before
# runpy runs that module again as ``__main__``; runpy warns about it. The second copy only runs
# the command (its own train and Training), so the warning says nothing: silence exactly it.
warnings.filterwarnings(
    "ignore",
    message=r"'lsbcore\.rbm\.train' found in sys\.modules after import of package 'lsbcore\.rbm'",
    category=RuntimeWarning,
)

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_ROWS",
    "MAX_VISIBLE",
    "MAX_TRAINING_SECONDS",
    "MODELS",
    "LABELS",
    "VARIANTS",
    "RBMComparison",
    "Training",
    "affordable_steps",
    "ais_log_partition",
    "baseline_log_likelihood",
    "describe",
    "digits",
    "display_name",
    "evals_per_step",
    "exact_log_likelihood",
    "exact_log_partition",
    "floor_draws",
    "ground_truth",
    "load_binary_data",
    "load_model",
    "log_mmd",
    "mmd",
    "noise_floor",
    "progress_bar",
    "pseudo_log_likelihood",
    "read_meta",
    "save_model",
    "train",
]
