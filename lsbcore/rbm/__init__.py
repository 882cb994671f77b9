"""The paper's RBM experiment: digit data, trained RBMs, their likelihoods (and, from the
comparison modules, ground truth, MMD and the live comparison)."""

from lsbcore.rbm.data import (
    MAX_FILE_BYTES,
    MAX_ROWS,
    MAX_VISIBLE,
    digits,
    load_binary_data,
)
from lsbcore.rbm.ground_truth import ground_truth, noise_floor
from lsbcore.rbm.likelihood import (
    ais_log_partition,
    baseline_log_likelihood,
    exact_log_likelihood,
    exact_log_partition,
    pseudo_log_likelihood,
)
from lsbcore.rbm.live import RBMComparison
from lsbcore.rbm.mmd import log_mmd, mmd
from lsbcore.rbm.models import MODELS, load_model, read_meta, save_model
from lsbcore.rbm.train import MAX_TRAINING_SECONDS, Training, progress_bar, train
from lsbcore.rbm.variants import LABELS, VARIANTS, describe

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
    "ais_log_partition",
    "baseline_log_likelihood",
    "describe",
    "digits",
    "exact_log_likelihood",
    "exact_log_partition",
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
