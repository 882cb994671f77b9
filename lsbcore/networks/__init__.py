"""Markov networks with near-deterministic factors: the LSB paper's third experiment (its
Table 3, MN 1 and MN 2) on generated grid networks and uploaded UAI files."""
