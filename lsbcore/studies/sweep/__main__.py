"""``python -m lsbcore.studies.sweep``: see ``lsbcore.studies.sweep.cli``."""

from lsbcore import interrupt
from lsbcore.studies.sweep.cli import main

if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.sweep"))
