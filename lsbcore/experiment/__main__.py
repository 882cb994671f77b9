"""``python -m lsbcore.experiment ...``: the experiment study's command
(``lsbcore.studies.experiment``)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("lsbcore.studies.experiment", run_name="__main__", alter_sys=True)
