"""numba's cache is emptied when any kernel source changes (``backends.kernel_cache``): numba
itself checks only each kernel's own file, so a kernel inlining a changed helper kept its old
code (found when a new kind of balancing function was read as another from a stale cache)."""

from __future__ import annotations

from lsbcore.backends import kernel_cache


def test_a_change_of_any_source_empties_the_cache_once(tmp_path):
    sources, cache = tmp_path / "pkg", tmp_path / "pkg" / "__pycache__"
    cache.mkdir(parents=True)
    (sources / "kernels.py").write_text("def log_g(): return 1\n")
    (sources / "rbm_kernels.py").write_text("from kernels import log_g\n")

    def compiled():  # what numba leaves after a compile
        for name in ("rbm_kernels.step-3.py311.nbi", "rbm_kernels.step-3.py311.1.nbc"):
            (cache / name).write_bytes(b"machine code")

    compiled()
    assert kernel_cache.drop_stale(cache, sources)  # no digest yet: compiled by unknown code
    assert not list(cache.glob("*.nb*"))
    compiled()
    assert not kernel_cache.drop_stale(cache, sources)  # unchanged sources: the cache stays
    assert len(list(cache.glob("*.nb*"))) == 2
    (sources / "kernels.py").write_text("def log_g(): return 2\n")  # only the helper changed
    assert kernel_cache.drop_stale(cache, sources)
    assert not list(cache.glob("*.nb*"))
    (cache / "other.pyc").write_bytes(b"python's own")  # the interpreter's files are kept
    (sources / "new.py").write_text("\n")
    assert kernel_cache.drop_stale(cache, sources)
    assert (cache / "other.pyc").exists()


def test_the_package_cache_carries_the_digest_of_its_sources():
    import lsbcore.backends  # noqa: F401  (its import checks the cache)

    digest = kernel_cache.DIGEST_FILE.read_text().strip()
    assert digest == kernel_cache.sources_digest()
