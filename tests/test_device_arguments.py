"""What the device launchers hand their Triton kernels: no Python float. On CUDA Triton types
a Python float argument fp32 (the interpreter keeps it fp64), so Z's range [e^-200, e^200]
became [0, inf] and a learning rate lost digits on an H100, while every test on the CPU
passed. Real arguments travel as float64 tensors (``primitives.reals``)."""

from __future__ import annotations

import pytest
import torch
from device_mode import DEVICE  # before Triton: the interpreter's switch

pytest.importorskip("triton")

from lsbcore import IsingPosterior, make_sampler  # noqa: E402
from lsbcore.backends.device import balanced, mixture, network  # noqa: E402


class Stop(Exception):
    """Raised by the recorder once it has seen a launch."""


class Recorder:
    """Stands in for a kernel: ``kernel[grid](*args, **constexprs)`` records and stops."""

    def __init__(self):
        self.args = None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.args = args
            raise Stop

        return launch


def target() -> IsingPosterior:
    alpha = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return IsingPosterior(alpha, 0.5, "free")


@pytest.mark.parametrize(
    "module, kernel, name, learn",
    [
        (balanced, "balanced_kernel", "max", False),
        (balanced, "balanced_kernel", "lsb1", False),
        (mixture, "mixture_kernel", "lsb1", True),
        (network, "network_kernel", "lsb2", True),
    ],
)
def test_no_kernel_gets_a_python_float(monkeypatch, module, kernel, name, learn):
    recorder = Recorder()
    monkeypatch.setattr(module, kernel, recorder)
    sampler = make_sampler(name, target(), 2, seed=1, backend="device", device=DEVICE)
    with pytest.raises(Stop):
        sampler.step(3, learn=learn)
    assert recorder.args is not None
    floats = [i for i, a in enumerate(recorder.args) if isinstance(a, float)]
    assert not floats, f"{kernel} got Python floats at positions {floats}"
    real_tensors = [a for a in recorder.args if torch.is_tensor(a) and a.dtype == torch.float64]
    assert real_tensors  # the reals did arrive, as tensors
