"""``python -m lsbcore.studies``: list the studies; ``python -m lsbcore.studies NAME [ARGS]``:
run one (``ARGS`` go to its command)."""

import sys

from lsbcore import interrupt
from lsbcore.studies import BY_NAME, STUDIES


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in {"-h", "--help"}:
        width = max(len(s.name) for s in STUDIES)
        print(
            "usage: python -m lsbcore.studies NAME [ARGS]   (ARGS: NAME's own; --help lists them)"
        )
        for study in STUDIES:
            print(f"  {study.name:<{width}}  {study.summary}")
        return 0
    study = BY_NAME.get(argv[0])
    if study is None:
        print(f"error: no study called {argv[0]!r}; choose one of: {', '.join(BY_NAME)}.",
              file=sys.stderr)  # fmt: skip
        return 2
    return study.main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies"))
