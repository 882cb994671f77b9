"""The registry entries of the flow-augmented samplers: the catalogue (``lsbcore/__init__.py``)
registers them after the core's samplers."""

from __future__ import annotations

from lsbcore.methods.flows.exact_sampler import (
    MAX_DRAWS,
    MAX_TRAIN_STEPS,
    FlowExactSampler,
    flow_refusal,
)
from lsbcore.methods.flows.latent_sampler import FlowLatentSampler
from lsbcore.samplers.registry import Option, SamplerSpec

# Flow-augmented MCMC (Jaini, Nielsen and Welling 2021): a dequantiser and a coupling flow
# trained on the target (lsbcore.methods.flows), used by the paper's latent chain or as an exact
# proposal
TRAIN_STEPS = Option(
    "train_steps", 1000, 0, MAX_TRAIN_STEPS,
    help="steps of flow training before sampling (0: the untrained flow); ignored with flow=",
)  # fmt: skip
FLOW_EXACT = (
    SamplerSpec(
        "flow-exact", "Flow (exact)",
        "The trained flow as an independence proposal on the target itself, its proposal mass "
        "estimated without bias by importance sampling over the dequantiser (pseudo-marginal "
        "Metropolis-Hastings): exact whatever the flow",
        "#8700C3", FlowExactSampler,
        (TRAIN_STEPS,
         Option("importance", 1, 1, MAX_DRAWS,
                help="K, importance draws per estimate of the flow's mass of a state")),
        move="sweep", family="flow", build_any=FlowExactSampler, app=True,
        takes_flow=True, refuse=flow_refusal,
    )
)  # fmt: skip
FLOW_LATENT = (
    SamplerSpec(
        "flow-latent", "Flow latent (approx.)",
        "Approximate: the paper's sampler, a random-walk Metropolis-Hastings chain in the "
        "flow's latent space mapped back by x = sign(T(z)); exact only in the limit of long "
        "runs, its bias measured against enumeration",
        "#696900", FlowLatentSampler,
        (TRAIN_STEPS,
         Option("step_scale", 1.0, 0.01, 10.0,
                help="the random walk's step in units of 2.38 / sqrt(n)")),
        move="sweep", family="flow", build_any=FlowLatentSampler, app=True,
        takes_flow=True, approximate=True, refuse=flow_refusal,
    )
)  # fmt: skip
