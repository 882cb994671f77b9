"""The first page loads only what it draws: the libraries that only some views or a later
diagnostic need (seconds of imports on a cold server) are imported on first use. The time
itself is a benchmark (``python -m tools.first_render``, BENCHMARKS.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# arviz-stats (with scipy.signal and scipy.stats under it): the bulk ESS and R-hat; scipy.stats:
# the settled check's t quantile; pandas: the RBM move table
LATER = ("arviz_stats", "scipy.signal", "scipy.stats", "pandas")


def test_the_page_modules_leave_the_later_libraries_unimported():
    script = (
        "import sys\n"
        "import lsbcore, app.config, app.live, app.session, app.sidebar, app.view_catalogue\n"
        f"print(','.join(m for m in {LATER!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "", f"imported with the page: {done.stdout.strip()}"
