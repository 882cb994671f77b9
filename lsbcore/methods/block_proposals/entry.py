"""The registry entry of the learned block proposals' sampler: the catalogue
(``lsbcore/__init__.py``) registers it after the core's samplers."""

from __future__ import annotations

from lsbcore.methods.block_proposals.sampler import WEIGHTS, NeuralBlockSampler, grid_refusal
from lsbcore.samplers.registry import Option, SamplerSpec

# Learned block proposals (Wang et al. 2018): a meta-trained network proposes whole k x k tiles
# of a grid, accepted by Metropolis-Hastings with the exact target ratio
NEURAL_BLOCK = (
    SamplerSpec(
        "neural-block", "Neural block",
        "Learned block proposals: a network trained once on random k x k blocks proposes whole "
        "tiles given their boundary, accepted by Metropolis-Hastings (exact whatever the network)",
        "#784B0F", NeuralBlockSampler,
        (Option("block_size", 2, 2, 4, help="k: tiles of k x k sites (2^(k^2) states each)"),
         Option("weights", "trained", choices=WEIGHTS,
                help="the shipped meta-trained network, or the untrained one (exact either way)")),
        move="block", family="block", build_any=NeuralBlockSampler, app=False,
        refuse=grid_refusal,
    )
)  # fmt: skip
