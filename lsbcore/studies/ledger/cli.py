"""``python -m lsbcore.studies ledger``: write the reproduction ledger at the top of
``docs/reproduction.md`` (``--check``: say whether it is current and agrees with the page's
generated sections, writing nothing)."""

from __future__ import annotations

import argparse
import sys

from lsbcore import interrupt, out_path
from lsbcore.studies.ledger import document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=document.COMMAND,
        description="Write the ledger of the sources' claims at the top of docs/reproduction.md.",
    )
    parser.add_argument("--out", type=out_path.output_file, default="docs/reproduction.md")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the page's ledger is stale or a generated section's "
        "verdict disagrees with it",
    )
    args = parser.parse_args(argv)
    try:
        doc = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if not args.check:
            document.write(args.out)
            print(f"wrote the ledger at the top of {out_path.shown(args.out)}", file=sys.stderr)
            return 0
    except (OSError, UnicodeDecodeError) as err:
        parser.error(f"--out {out_path.shown(args.out)} cannot be read or written: {err}")
    problems = document.disagreements(doc)
    if document.ledger_of(doc) != document.render():
        problems.insert(
            0, f"the ledger in {out_path.shown(args.out)} is stale: run {document.COMMAND}."
        )
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, document.COMMAND))
