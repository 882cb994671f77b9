"""``python -m lsbcore.studies.sweep``: see ``lsbcore.studies.sweep.cli``."""

import sys

from lsbcore.studies.sweep.cli import main

if __name__ == "__main__":
    sys.exit(main())
