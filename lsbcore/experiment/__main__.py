"""``python -m lsbcore.experiment ...``: the experiment command (``lsbcore.experiment.cli``)."""

from lsbcore.experiment.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
