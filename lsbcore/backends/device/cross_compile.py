"""Compile every device kernel for a CUDA architecture without a GPU:
``python -m lsbcore.backends.device.cross_compile [--arch 90]``.

Triton's front end, its lowering to PTX and ptxas (shipped in the Triton wheel) need no GPU,
so a CPU-only machine can check what the interpreter cannot: that the kernels are valid Triton
for the real compiler (constexpr globals, loop-carried types, scalar branches) and assemble
for the architecture, with their registers and spills. Run it with ``TRITON_INTERPRET`` unset:
the interpreter replaces the kernels by Python functions. It checks this Triton, not the one a
GPU machine's torch ships (BENCHMARKS.md, GPU).
"""

from __future__ import annotations

import argparse
import os
import sys

DOUBLE = "*fp64"


def variants():
    """``(name, kernel, signature, constexprs, options)`` as the launchers call the kernels."""
    from lsbcore.backends.device import balanced, checkerboard

    sweep = {name: DOUBLE for name in ("x_in", "s_in", "x_out", "s_out", "u", "pull_coupling")}
    sweep.update(truth=DOUBLE, partial=DOUBLE, colour="*i32", pull_site="*i32")
    sweep.update({name: "i32" for name in ("c", "n_chains", "n_sites", "width", "n_tiles")})
    sweep.update(PULL="constexpr", BLOCK_B="constexpr", BLOCK_D="constexpr")
    tile = {"PULL": 4, "BLOCK_B": 1, "BLOCK_D": checkerboard.MAX_TILE}
    exact = {"enable_fp_fusion": False}  # as the launchers
    yield "checkerboard", checkerboard.colour_update_kernel, sweep, tile, exact
    step = {
        name: DOUBLE
        for name in ("x", "s", "stats", "truth", "trace", "sign", "coupling", "unique", "gn")
    }
    step.update({name: DOUBLE for name in ("block_sum", "z", "shift", "u", "last")})
    step.update({name: DOUBLE for name in ("log_w", "breakpoints", "slope", "intercept")})
    step.update(n_accepted="*i64", neighbours="*i64", rebuilt="*i32", bounds=DOUBLE)
    counts = ("m", "n_chains", "n_sites", "width", "n_blocks", "block", "n_breakpoints")
    step.update({n: "i32" for n in counts})
    step.update({n: "constexpr" for n in ("K", "KP", "KIND", "TRACE", "BLOCK_B")})
    # KIND as structures.Function: the fixed functions, then LSB 1's mixture and LSB 2's network
    for kind, name in enumerate(("barker", "sqrt", "min", "max", "lsb1", "lsb2")):
        constants = {"K": 5, "KP": 8, "KIND": kind, "TRACE": True, "BLOCK_B": 1}
        options = {**exact, "num_warps": 1}
        yield f"balanced {name}", balanced.balanced_kernel, step, constants, options
    yield from learning_variants(exact)


def learning_variants(exact: dict):
    """LSB 1's and LSB 2's learning kernels, for both optimisers (30 chains, as the paper)."""
    from lsbcore.backends.device import learning, mixture, network

    common = {
        name: DOUBLE for name in ("x", "s", "stats", "truth", "trace", "sign", "coupling", "unique")
    }
    common.update({n: DOUBLE for n in ("theta", "opt_state", "log_p_learn", "field", "u")})
    common.update({n: DOUBLE for n in ("losses", "weights", "last")})
    common.update(n_accepted="*i64", neighbours="*i64", halt="*i64", real_args=DOUBLE)
    common.update({n: "i32" for n in ("field_rows", "m", "n_chains", "n_sites", "width")})
    common.update(fresh="i32")
    constants = {"K": 5, "KP": 8, "TRACE": True, "BLOCK_B": 32, "TILE": learning.TILE}
    for opt, opt_name in enumerate(("adam", "sgd")):
        signature = {**common, **{n: DOUBLE for n in ("comps", "shift", "sums")}}
        signature.update({n: "constexpr" for n in ("K", "KP", "OPT", "TRACE", "BLOCK_B", "TILE")})
        yield (
            f"learning lsb1 {opt_name}", mixture.mixture_kernel, signature,
            {**constants, "OPT": opt}, {**exact, "num_warps": learning.WARPS},
        )  # fmt: skip
        signature = {**common, **{n: DOUBLE for n in ("u_cache", "scale", "small", "top_cache")}}
        signature.update(g_buf=DOUBLE, unit_buf=DOUBLE, partial=DOUBLE)
        signature.update({n: "i32" for n in ("hidden", "t0", "n_blocks", "span")})
        signature.update(
            {n: "constexpr" for n in ("K", "KP", "HP", "PP", "OPT", "TRACE", "BLOCK_B", "TILE")},
            SPLIT="constexpr",
        )
        for split in (False, True) if opt == 0 else (False,):
            yield (
                f"learning lsb2 {opt_name}{' split' if split else ''}", network.network_kernel,
                signature, {**constants, "HP": 16, "PP": 32, "OPT": opt, "SPLIT": split},
                {**exact, "num_warps": learning.WARPS},
            )  # fmt: skip
    lattice = {name: DOUBLE for name in ("s", "u_cache", "scale", "small", "g_buf", "theta")}
    lattice.update(partial=DOUBLE, halt="*i64", HP="constexpr", TILE="constexpr")
    lattice.update({n: "i32" for n in ("t", "n_chains", "n_sites", "width", "hidden", "span")})
    yield (
        "learning lsb2 lattice", network.lattice_kernel, lattice,
        {"HP": 16, "TILE": network.SPAN_TILE}, {**exact, "num_warps": 4},
    )  # fmt: skip


def compile_one(index: int, arch: int) -> tuple[str, int]:
    """The ``index``-th variant compiled to a cubin for ``sm_<arch>``: its name and PTX length."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    name, kernel, signature, constants, options = list(variants())[index]
    # as a launch on CUDA specialises them: pointers (torch allocations) and integers equal to
    # 0 (field_rows for the exact objective) are divisible by 16, which changes the layouts
    # Triton picks (a kernel once compiled here without them and failed on an H100)
    attrs = {
        (i,): [["tt.divisibility", 16]]
        for i, arg in enumerate(kernel.arg_names)
        if signature[arg].startswith("*") or arg == "field_rows"
    }
    source = ASTSource(kernel, signature, constexprs=constants, attrs=attrs)
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    if "cubin" not in compiled.asm:
        raise RuntimeError(f"{name}: no cubin for sm_{arch}.")
    return name, len(compiled.asm["ptx"])


def compile_all(arch: int, jobs: int = 1) -> dict[str, int]:
    """Every variant compiled for ``sm_<arch>`` (``jobs`` processes: Triton compiles on one
    core); returns each PTX length by name."""
    indices = range(len(list(variants())))
    if jobs <= 1:
        return dict(compile_one(i, arch) for i in indices)
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        return dict(pool.map(compile_one, indices, [arch] * len(indices)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability (90: H100)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        parser.error("unset TRITON_INTERPRET: the interpreter does not compile kernels.")
    for name, size in compile_all(args.arch, args.jobs).items():
        print(f"{name:20s} sm_{args.arch} ok ({size:,} characters of PTX)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
