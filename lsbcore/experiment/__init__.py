"""``python -m lsbcore.experiment``, the command users know, kept: the experiment study lives in
``lsbcore.studies.experiment`` (every study: ``python -m lsbcore.studies``)."""

from lsbcore.studies.experiment import *  # noqa: F403
from lsbcore.studies.experiment import __all__  # noqa: F401
