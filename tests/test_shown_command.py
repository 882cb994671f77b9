"""The command a generated section of docs/reproduction.md shows: no machine-specific paths."""

import pytest

from lsbcore.studies.shared.shown_command import shown_argv, shown_command


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["--target", "rbm-digits", "--out", "/tmp/run", "--seeds", "3"],
         ["--target", "rbm-digits", "--seeds", "3"]),
        (["--out=/tmp/run", "--quick"], ["--quick"]),
        (["--json", "/tmp/a.json", "--from-json=/tmp/b.json", "--quick"], ["--quick"]),
        (["--docs", "docs/reproduction.md"], ["--docs", "docs/reproduction.md"]),
        (["--docs", "/home/me/notes/page.md"], ["--docs", "page.md"]),
        (["--docs=/home/me/page.md"], ["--docs", "page.md"]),
        (["--docs"], ["--docs"]),  # a flag without its value stays as given
    ],
)  # fmt: skip
def test_private_paths_are_left_out_and_a_docs_path_is_named_only(argv, shown):
    assert shown_argv(argv) == shown


def test_the_command_is_quoted_for_a_shell():
    assert shown_command(["--image", "my photo.png"]) == (
        "python -m lsbcore.experiment --image 'my photo.png'"
    )
