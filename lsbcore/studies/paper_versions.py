"""The arXiv version's Ising tables, as printed, beside the ICML Table 2 our runs are compared to.

The LSB paper exists in two versions (``../shared/papers``: the ICML 2022 proceedings and an
earlier arXiv preprint). Their Table 2s report the same four cases with different numbers; the
arXiv version also has a Table 1 on two settings. ``docs/reproduction.md`` shows both beside
each other and says which one our figures are compared to (the ICML one, ``PAPER_TABLE2``).
"""

from __future__ import annotations

__all__ = ["ARXIV_TABLE1", "ARXIV_TABLE2", "ARXIV_TABLE1_SETTINGS"]

#: arXiv Table 2: paper ESS mean and std over chains, per case and sampler (as printed).
ARXIV_TABLE2 = {
    1: {"barker": (2.48, 0.21), "sqrt": (2.30, 0.22), "min": (2.42, 0.19),
        "max": (1.75, 0.17), "lsb1": (2.50, 0.28), "lsb2": (2.46, 0.28)},
    2: {"barker": (3.33, 0.32), "sqrt": (2.94, 0.36), "min": (3.33, 0.33),
        "max": (1.72, 0.18), "lsb1": (2.98, 0.24), "lsb2": (3.33, 0.43)},
    3: {"barker": (2.58, 0.73), "sqrt": (1.99, 0.43), "min": (2.56, 0.62),
        "max": (1.26, 0.12), "lsb1": (2.48, 0.61), "lsb2": (2.67, 0.84)},
    4: {"barker": (32.8, 9.2), "sqrt": (18.5, 6.8), "min": (31.8, 10.0),
        "max": (2.60, 1.46), "lsb1": (18.4, 8.0), "lsb2": (30.8, 9.2)},
}  # fmt: skip

#: arXiv Table 1 ("universally optimal balancing function?"): rows as printed, the fixed
#: functions only. The text extraction lost its sqrt(t) column, so it is left out here.
ARXIV_TABLE1 = {
    "Noisy": {"barker": (2.48, 0.21), "min": (2.42, 0.19), "max": (1.75, 0.17)},
    "Clean": {"barker": (2.58, 0.73), "min": (2.56, 0.62), "max": (1.26, 0.12)},
}

#: What its text says the two rows are: (lambda, mu, sigma), the paper cases with those numbers.
ARXIV_TABLE1_SETTINGS = {"Noisy": ((0.0, 1.0, 3.0), 1), "Clean": ((1.0, 1.0, 3.0), 3)}
