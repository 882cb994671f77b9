#!/usr/bin/env bash
# The one command for a lent GPU (issue 41), from the repository's root, with the device tool:
#   run(command="bash tools/gpu/device.sh --budget 540", carry=[".gpu/cache", ".gpu/wheels-gpu"],
#       timeout_s=600)
# (`make gpu-cache` builds both carried folders here first.) The GPU machines' Python lacks two of
# the library's packages (PyMaxflow, zuko): their wheels travel in .gpu/wheels-gpu. Arguments go
# to tools.gpu.session (--rerun .gpu/rerun.json for a second call; carry that file too).
set -u
if ls .gpu/wheels-gpu/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/lsb-site .gpu/wheels-gpu/*.whl && export PYTHONPATH=/tmp/lsb-site
fi
exec python3 -m tools.gpu.session --out "${OUT:?the device tool sets OUT}" "$@"
