"""The targets: what a sampler may ask of a distribution over {-1, +1}^n, and the models.

``base.Target`` is the protocol; ``ising`` and ``pairwise`` implement it.
"""
