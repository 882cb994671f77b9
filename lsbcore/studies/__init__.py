"""The studies: everything that runs an experiment, writes a report or a benchmark, or
regenerates an asset. The top layer of lsbcore: a study imports the core and the methods, and
nothing below imports a study.

Every study is a command (``python -m <module> --help``); ``STUDIES`` names them, and
``python -m lsbcore.studies`` lists them or runs one by name
(``python -m lsbcore.studies sweep --help``). The pieces they share, written once, are in
``lsbcore.studies.shared``: argument types, the commit, generated doc sections (output paths and
Ctrl-C, which ``lsbcore.rbm.train`` shares too, are ``lsbcore.out_path`` and ``lsbcore.interrupt``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Study:
    """One study: its ``name``, what it does, the ``module`` whose ``main(argv)`` runs it, and
    the section of ``docs/reproduction.md`` it generates (``None``: it writes no section)."""

    name: str
    summary: str
    module: str
    doc_section: str | None = None

    def main(self, argv: list[str] | None = None) -> int:
        """Run the study's command with ``argv``; its exit code."""
        command = importlib.import_module(self.module).main
        return int(command(argv) or 0)


STUDIES = tuple(
    Study(*fields)
    for fields in (
        ("experiment", "the Ising comparison of Table 2, the RBM, Markov-network and flow "
         "comparisons (--target): results, traces and a report", "lsbcore.studies.experiment.cli",
         "table-2, rbm-digits, networks, flow-denoising"),
        ("reproduce", "docs/reproduction.md from runs of the current code",
         "lsbcore.studies.reproduce", "the whole document"),
        ("ledger", "the ledger of every claim of the sources at the top of docs/reproduction.md",
         "lsbcore.studies.ledger.cli", "ledger"),
        ("sweep", "a grid of experiment runs on Dask into one SQLite results file",
         "lsbcore.studies.sweep.cli"),
        ("sweep-report", "the 'which g where' map of a sweep's results",
         "lsbcore.studies.sweep.report"),
        ("sweep-rbm", "the LSB paper's RBM experiment with each sampler and seed a cell on Dask",
         "lsbcore.studies.sweep.rbm_cells", "rbm-digits, rbm-digits-28x28"),
        ("flow-bias", "flow-latent's and flow-exact's TV to enumeration",
         "lsbcore.studies.flows.bias"),
        ("flow-diagnose", "why flow-exact moves or not: the flow's bound against the exact "
         "log Z, its mass estimates, the chains' acceptance", "lsbcore.studies.flows.diagnose"),
        ("variable-selection", "the flow paper's Bayesian variable selection (Table 3): ESS, "
         "log p~ and the features found per sampler", "lsbcore.studies.variable_selection"),
        ("discretised-mixture", "the flow paper's discretised Gaussian mixtures (Figure 1): "
         "the TV to enumeration of the flow's draws, flow-exact and the baselines",
         "lsbcore.studies.discretised_mixture"),
        ("quantised-logistic", "the flow paper's quantised logistic regression (Table 2): ESS, "
         "ESS per minute, test accuracy and log p~ per sampler on four data sets",
         "lsbcore.studies.quantised_logistic"),
        ("block-proposals-train", "meta-train the shipped block proposals",
         "lsbcore.studies.block_proposals.train"),
        ("block-proposals-held-out", "the block proposals' KL to the exact conditionals",
         "lsbcore.studies.block_proposals.held_out"),
        ("block-kl", "the block-proposal slides' KL experiment: one network trained on one "
         "determinism and alpha of grid networks, its KL on a 3 x 3 grid of them",
         "lsbcore.studies.block_proposals.block_kl", "block-kl"),
        ("rbm-train", "train an RBM by PCD (the shipped models)", "lsbcore.rbm.train"),
        ("rbm-ground-truth", "the exact block-Gibbs truth file of an RBM",
         "lsbcore.rbm.ground_truth"),
        ("bench", "the engine: samplers and comparisons, steps per second",
         "lsbcore.studies.benchmarks.samplers"),
        ("bench-targets", "samplers beyond pairwise (RBM, factor graph)",
         "lsbcore.studies.benchmarks.targets"),
        ("bench-recorded", "samplers recorded at every step (the network page, an RBM)",
         "lsbcore.studies.benchmarks.recorded"),
        ("bench-gpu", "the GPU's figures (issue 41), each saved the moment it is measured",
         "lsbcore.studies.benchmarks.gpu"),
        ("bench-photos", "lsbcore.segment on the shipped photos",
         "lsbcore.studies.benchmarks.photos"),
        ("bench-boxes", "lsbcore.segment with a box prompt on public photos: seconds to "
         "settled, the mask's share of the box and IoU with hand masks",
         "lsbcore.studies.benchmarks.box_prompts"),
        ("bench-annealing", "annealing to the MAP", "lsbcore.studies.benchmarks.annealing"),
        ("bench-importance", "importance sampling's collapse with size",
         "lsbcore.studies.benchmarks.importance"),
        ("bench-tempering", "parallel tempering against one chain",
         "lsbcore.studies.benchmarks.tempering"),
        ("bench-rbm", "the RBM samplers to the MMD floor", "lsbcore.studies.rbm.bench"),
        ("bench-flows", "the flow samplers' training and steps", "lsbcore.studies.flows.benchmark"),
        ("bench-block-proposals", "neural-block against exact tiles",
         "lsbcore.studies.block_proposals.benchmark"),
        ("bench-sweep", "the sweep's cells per second", "lsbcore.studies.sweep.benchmark"),
        ("bench-hostile", "the hostile-file corpus: each reader's seconds and memory to refuse",
         "lsbcore.studies.benchmarks.hostile"),
    )
)  # fmt: skip
BY_NAME = {study.name: study for study in STUDIES}
