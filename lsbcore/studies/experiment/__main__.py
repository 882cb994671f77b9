"""``python -m lsbcore.experiment ...``: the experiment command
(``lsbcore.studies.experiment.cli``)."""

import os
import sys

from lsbcore import interrupt
from lsbcore.studies.experiment.cli import INTERRUPTED, main

if __name__ == "__main__":
    code = interrupt.run_command(main, "python -m lsbcore.experiment")
    if code in INTERRUPTED:
        # stopped by a signal: the staging folder is gone and the workers are terminated, so
        # exit now rather than wait in the process pool's exit hooks for workers already dead
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)
