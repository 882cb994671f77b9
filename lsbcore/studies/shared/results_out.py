"""Writing a study's results: ``results.json`` in its output folder and its generated section of
``docs/reproduction.md``, each said on the way, a failure in one sentence."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from lsbcore import out_path


def write_results(
    results: dict,
    out: Path | None,
    docs: Path | None,
    section: Callable[[dict], str],
    write_section: Callable[[Path, str], None],
    name: str,
    say: Callable[[str], None],
) -> int:
    """``out/results.json`` (when ``out``) and ``section(results)`` written into ``docs`` by
    ``write_section`` (when ``docs``); 0, or 1 after the sentence that says what failed."""
    try:
        if out is not None:
            out_path.write_text(out / "results.json", json.dumps(results, indent=1))
            say(f"wrote {out / 'results.json'}")
        if docs is not None:
            write_section(docs, section(results))
            say(f"wrote the {name} section of {docs}")
    except OSError as err:
        print(f"could not write the results: {err.strerror or err}.", file=sys.stderr)
        return 1
    return 0
