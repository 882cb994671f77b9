"""The device kernels compile for an H100 (sm_90) on a machine without a GPU: Triton's real
compiler and the ptxas in its wheel accept them as the launchers call them (what Triton's
interpreter, which the other device tests use, never checks)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")


def test_every_device_kernel_compiles_for_sm_90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "0"  # the launchers turn fusion off anyway
    done = subprocess.run(
        [sys.executable, "-m", "lsbcore.backends.device.cross_compile", "--arch", "90"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    compiled = [line.split()[0] for line in done.stdout.splitlines() if " ok " in line]
    assert compiled.count("balanced") == 6 and compiled.count("checkerboard") == 1  # KIND 0-5
    # LSB 1 and 2 with Adam and SGD, LSB 2 split (its step and its lattice kernel)
    assert compiled.count("learning") == 6


def test_no_kernel_argument_shadows_the_launchers_own_names():
    """Triton 3.6 (the GPU machines' torch 2.11 ships it) binds a launch's arguments in generated
    code that keeps a local dict named ``params``: a kernel argument of that name is replaced by
    the dict and the launch fails ("failed to specialize argument of type: dict"), seen on an
    H100. The interpreter and Triton 3.9 do not show it, so the names are checked here."""
    from lsbcore.backends.device import balanced, checkerboard, mixture, network

    kernels = [balanced.balanced_kernel, checkerboard.colour_update_kernel,
               mixture.mixture_kernel, network.lattice_kernel, network.network_kernel]  # fmt: skip
    for kernel in kernels:
        assert "params" not in kernel.arg_names, kernel
