"""A chunk of device steps reads no tensor value on the host (issue 14: no host syncs inside a
chunk). On CUDA each such read (``item``, ``bool``, ``float``, ``tolist``, ``cpu``, ``numpy``)
waits for the GPU; the audit runs on the CPU and records the reads that library code makes."""

from __future__ import annotations

import sys

import pytest
import torch
from device_mode import DEVICE, cpu_uniforms  # before Triton: the interpreter's switch
from torch.overrides import TorchFunctionMode

pytest.importorskip("triton")

from lsbcore import IsingPosterior, make_sampler  # noqa: E402

HOST_READS = {
    torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__float__,
    torch.Tensor.__int__, torch.Tensor.__index__, torch.Tensor.cpu, torch.Tensor.numpy,
}  # fmt: skip


class HostReads(TorchFunctionMode):
    """Records ``(module, line, call)`` of every host read whose caller is ``lsbcore`` code
    (the interpreter's own copies come from Triton's frames and are not the library's)."""

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_READS:
            frame = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__", "").startswith("torch"):
                frame = frame.f_back
            module = frame.f_globals.get("__name__", "") if frame is not None else ""
            if module.startswith("lsbcore"):
                self.reads.append((module, frame.f_lineno, func.__name__))
        return func(*args, **(kwargs or {}))


def target() -> IsingPosterior:
    alpha = torch.randn(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return IsingPosterior(alpha, 0.5, "periodic")


def reads_of_a_chunk(name: str, backend: str, device: str = DEVICE) -> list:
    sampler = make_sampler(name, target(), 3, seed=2, backend=backend, device=device)
    cpu_uniforms(sampler)
    sampler.track_statistics()
    sampler.step(2)  # first calls build the tables and caches
    with HostReads() as audit:
        sampler.step(6)
    return audit.reads


@pytest.mark.parametrize("name", ["checkerboard", "barker", "sqrt", "min", "max", "lsb1", "lsb2"])
def test_a_chunk_of_device_steps_reads_nothing_on_the_host(name):
    assert reads_of_a_chunk(name, "device") == []


@pytest.mark.parametrize("name,split", [("lsb1", False), ("lsb2", False), ("lsb2", True)])
def test_a_chunk_of_device_learning_reads_the_host_once_at_its_end(name, split, monkeypatch):
    """Learning steps: one copy to the host after the chunk (steps taken, status, losses and
    weights for the history), none per step, LSB 2's lattice kernel launched per step
    included (``split``). No restarts here: they are drawn on the host between chunks."""
    from lsbcore.backends.device import network

    if split:
        monkeypatch.setattr(network, "SPLIT_ABOVE", 0)
    sampler = make_sampler(name, target(), 3, seed=2, backend="device", device=DEVICE,
                           restart_prob=0.0)  # fmt: skip
    cpu_uniforms(sampler)
    sampler.track_statistics()
    sampler.step(2, learn=True)
    with HostReads() as audit:
        sampler.step(6, learn=True)
    assert sampler.n_steps == 8
    assert len({line for _, line, _ in audit.reads}) == 1  # one line of code
    assert [call for _, _, call in audit.reads] == ["cpu", "numpy"]  # numpy(): the host copy


def test_the_audit_sees_the_torch_steps_host_reads():
    """The torch locally balanced step checks Z's range on the host every step: the audit must
    see it, or it proves nothing."""
    reads = reads_of_a_chunk("sqrt", "torch", device="cpu")
    assert any(module == "lsbcore.samplers.balanced.pairwise" for module, _, _ in reads)
