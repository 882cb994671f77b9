"""``python -m lsbcore.sweep``: see ``lsbcore.sweep.cli``."""

import sys

from lsbcore.sweep.cli import main

if __name__ == "__main__":
    sys.exit(main())
