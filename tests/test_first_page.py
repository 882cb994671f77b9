"""The first page loads only what it draws: the libraries that only some views or a later
diagnostic need (seconds of imports on a cold server) are imported on first use, and of the
views only the open one's module is imported. The time itself is a benchmark
(``python -m tools.first_render``, BENCHMARKS.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app" / "streamlit_app.py")
# arviz-stats (with scipy.signal and scipy.stats under it): the bulk ESS and R-hat; scipy.stats:
# the settled check's t quantile; pandas: the RBM move table; scipy.fft: the autocorrelation
LATER = ("arviz_stats", "scipy.signal", "scipy.stats", "pandas", "scipy.fft")
# what only a view that is not open needs: the exact chain's sparse solvers, the experiment
# reports (Export), the sweep store (Which g where), tempering, annealing, importance sampling
NOT_OPEN = (
    "scipy.sparse.linalg",
    "lsbcore.exact",
    "lsbcore.studies.experiment",
    "lsbcore.studies.sweep",
    "lsbcore.tempering",
    "lsbcore.annealing",
    "lsbcore.importance",
)
# the views of the default page: the Chains tab (open), the posterior and the About panel
FIRST_VIEWS = {"app.views.about", "app.views.chains", "app.views.pixels", "app.views.posterior"}


def test_the_page_modules_leave_the_later_libraries_unimported():
    script = (
        "import sys\n"
        "import lsbcore, app.config, app.live, app.session, app.sidebar, app.view_catalogue\n"
        f"print(','.join(m for m in {LATER + NOT_OPEN!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "", f"imported with the page: {done.stdout.strip()}"


def test_the_first_page_imports_only_the_open_views_module():
    """The default page (the Ising paper case, the Chains tab) run in a fresh interpreter: of
    the view modules only its own are imported, and none of the closed views' machinery; the
    kernels start compiling, and the later libraries importing, only once the page is drawn
    (numba's import would hold the interpreter meanwhile, and the page would wait for the
    libraries); a view opened later is imported then, and draws."""
    script = f"""
import sys
from lsbcore.samplers import warmup
from app import late_imports, page_state
drawn = []  # whether the page (its run and Run button) was drawn when the kernels started
warmup.compile_in_background = lambda: drawn.append(page_state.RUN.get() is not None)
# and when the later libraries' import started (held here: the check below is the page's own)
late_imports.in_background = lambda: drawn.append(page_state.RUN.get() is not None)
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({APP!r}, default_timeout=180)
at.run()
assert not at.exception, at.exception
print(drawn)
assert any(b.label == "Run" for b in at.button)
views = sorted(m for m in sys.modules if m.startswith("app.views."))
print(",".join(views))
print(",".join(m for m in {LATER + NOT_OPEN!r} if m in sys.modules))
at.session_state["view"] = "Exact chain"
at.run()
assert not at.exception, at.exception
print("app.views.exact_chain" in sys.modules, "lsbcore.exact" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    drawn, views, later, opened = done.stdout.strip().splitlines()[-4:]
    assert drawn == "[True, True]"  # compiled, then the later imports begun, after the page
    assert set(views.split(",")) == FIRST_VIEWS
    assert later == "", f"imported by the first page: {later}"
    assert opened == "True True"  # the view opened later was imported on its first draw
