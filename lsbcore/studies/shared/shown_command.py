"""The command line a generated section of ``docs/reproduction.md`` shows: the command as it
was run, without the paths that only make sense on the machine that ran it."""

from __future__ import annotations

import shlex
from pathlib import Path

DEFAULT_DOCS = Path("docs/reproduction.md")


def shown_argv(argv, private=("--json", "--from-json", "--out")) -> list[str]:
    """``argv`` without the ``private`` options (and their values), and with a ``--docs`` path
    shown as ``docs/reproduction.md`` when it is that file, else by its name only."""
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        name, has_value, value = a.partition("=")
        if name in private:
            skip = not has_value
            continue
        if name == "--docs":
            if not has_value:
                if i + 1 >= len(argv):
                    out.append(a)
                    continue
                skip, value = True, argv[i + 1]
            shown = DEFAULT_DOCS if Path(value) == DEFAULT_DOCS else Path(value).name
            out += ["--docs", str(shown)]
            continue
        out.append(a)
    return out


def shown_command(argv) -> str:
    """``python -m lsbcore.experiment`` with ``shown_argv(argv)``, quoted for a shell."""
    return shlex.join(["python", "-m", "lsbcore.experiment", *shown_argv(argv)])


__all__ = ["shown_argv", "shown_command"]
