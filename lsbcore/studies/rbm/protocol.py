"""The LSB paper's RBM protocol (appendix D) and its samplers: what the experiment command runs
and what its report compares against, apart from both so that neither imports the other."""

PAPER = {"burn_in": 24_000, "steps": 120_000, "chains": 16}  # appendix D, RBM
QUICK = {"burn_in": 300, "steps": 1_500, "chains": 16}  # about a minute on 2 cores
#: The samplers of the paper's Figure 4 (section 5.2) and Figures 8-9 (appendix F).
PAPER_LABELS = ("flsb1", "flsb2", "gwg", "gibbs-2", "gibbs-4", "gibbs-10", "hb-10-1",
                "hb-10-2", "hb-10-3")  # fmt: skip
