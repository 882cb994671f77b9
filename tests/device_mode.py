"""Where the device tests run the device kernels: in Triton's CPU interpreter (the default, on
any machine: ``make test``) or on a CUDA GPU (``LSB_DEVICE_TESTS=cuda``, the GPU command in
BENCHMARKS.md). Import it before anything imports Triton: it turns the interpreter on."""

from __future__ import annotations

import os

import torch

from lsbcore.numerics import BELOW_ONE

ON_GPU = os.environ.get("LSB_DEVICE_TESTS") == "cuda"
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are defined
DEVICE = "cuda" if ON_GPU else "cpu"


def cpu_uniforms(sampler, twin=None) -> None:
    """Give a CUDA sampler the uniforms a CPU sampler with its seed draws (a CUDA generator
    draws other numbers from one seed), so that its chains can be compared with the compiled
    kernel's. ``twin``, the CPU sampler it is compared with: the draws continue from the twin's
    generator as it stands now (a sampler may draw while it is built, a restart countdown for
    one). Nothing to do on the CPU."""
    if sampler.device.type == "cpu":
        return
    generator = torch.Generator().manual_seed(sampler.seed)
    if twin is not None:
        generator.set_state(twin.generator.get_state())

    def draw(m: int, width: int) -> torch.Tensor:
        u = torch.rand(m, sampler.n_chains, width, generator=generator, dtype=torch.float64)
        return u.mul_(BELOW_ONE).to(sampler.device)

    sampler._draw_uniforms = draw
    # restarts draw from the same stream as the twin's (its countdown was drawn at construction)
    sampler._restart_uniforms = lambda n: torch.rand(
        n, generator=generator, dtype=torch.float64
    ).to(sampler.device)
    sampler._restart_bits = lambda shape: torch.randint(0, 2, shape, generator=generator).to(
        sampler.device
    )
    if twin is not None and hasattr(twin, "_restart_wait"):
        sampler._restart_wait = twin._restart_wait
