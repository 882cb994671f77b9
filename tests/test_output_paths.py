"""One output-path rule for every command (``lsbcore.out_path``): each output flag is checked
while argparse reads the command line, before any work, and refused in one sentence with status
2 when its name is too long, its folder does not exist, it is a symbolic link, or it names a
folder where a file is wanted (a file where a folder is). The list of flags is read from the
commands' own parsers, so a new output flag without the rule fails here.

And one Ctrl-C rule (``lsbcore.interrupt``): every command stops on SIGINT, even one started
in the background by a script (SIGINT inherited ignored), says so in a sentence and exits 130;
``lsbcore.rbm.train`` keeps its training so far in ``--out`` and ``--resume`` continues it to
the model an uninterrupted run gives."""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lsbcore import out_path
from lsbcore.rbm.data import digits
from lsbcore.rbm.models import load_model, read_meta
from lsbcore.rbm.train import main as train_command
from lsbcore.rbm.train import read_resume, save_training, train

ROOT = Path(__file__).resolve().parents[1]
LONG = "n" * 300  # a name longer than a file system's 255 bytes
# help text that says a flag writes, but of a flag that reads what an earlier run wrote
WRITES = re.compile(r"\bwrites?\b")
# value flags that are output paths by their name, whatever their help says
RULE = (out_path.output_file, out_path.output_folder)
OUTPUT_NAMES = {"out", "json", "html", "docs", "work", "csv", "png", "svg", "pdf", "output"}


def command_modules() -> list[str]:
    """Every module of lsbcore that builds an argparse parser in a ``main``: the commands."""
    found = []
    for path in sorted((ROOT / "lsbcore").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "ArgumentParser" in text and re.search(r"^def main\(", text, re.M):
            found.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


class Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


def parser_of(module: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``module.main`` builds, caught when it starts reading the command line."""

    def capture(self, args=None, namespace=None):
        raise Captured(self)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
        with pytest.raises(Captured) as caught:
            importlib.import_module(module).main([])
    return caught.value.parser


def output_flags() -> list[tuple[str, str, str]]:
    """``(module, flag, "file" | "folder")`` for every output flag of every command."""
    monkeypatch = pytest.MonkeyPatch()
    try:
        flags = []
        for module in command_modules():
            for action in parser_of(module, monkeypatch)._actions:
                kind = {out_path.output_file: "file", out_path.output_folder: "folder"}.get(
                    action.type
                )
                if kind is not None:
                    flags.append((module, action.option_strings[-1], kind))
        return flags
    finally:
        monkeypatch.undo()


FLAGS = output_flags()


def test_every_flag_that_writes_a_path_follows_the_rule(monkeypatch):
    """A value flag named like an output, or whose help says it writes, is declared with
    ``out_path.output_file`` or ``output_folder``: the list below cannot miss a new one."""
    modules = command_modules()
    assert "lsbcore.rbm.train" in modules and "lsbcore.studies.sweep.cli" in modules
    missed = []
    for module in modules:
        for action in parser_of(module, monkeypatch)._actions:
            if not action.option_strings or action.nargs == 0 or action.dest == "help":
                continue
            if action.type not in (None, str, Path, *RULE):  # a number, a choice: not a path
                continue
            named = action.dest in OUTPUT_NAMES
            says = bool(WRITES.search(action.help or "")) and not action.dest.startswith("from_")
            rule = action.type in RULE
            if (named or says) and not rule:
                missed.append(f"{module} {action.option_strings[-1]}")
    assert missed == []
    assert len(FLAGS) >= 20  # the commands' output flags, found from their parsers


def bad_path(kind: str, where: str, tmp_path: Path) -> Path:
    """A path the rule refuses, for a file flag or a folder flag."""
    if where == "long name":
        return tmp_path / (LONG + (".json" if kind == "file" else ""))
    if where == "missing folder":
        return tmp_path / "no-such-folder" / "out.json"
    if where == "symbolic link":
        target = tmp_path / ("target.json" if kind == "file" else "target")
        if kind == "file":
            target.write_text("the user's own file")
        else:
            target.mkdir()
        link = tmp_path / "link"
        link.symlink_to(target)
        return link
    # the other kind of thing: a folder where a file is wanted, a file where a folder is
    if kind == "file":
        (tmp_path / "a-folder").mkdir()
        return tmp_path / "a-folder"
    (tmp_path / "a-file").write_text("the user's own file")
    return tmp_path / "a-file"


SAYS = {
    "long name": "a file or folder name holds at most 255",
    "missing folder": "does not exist",
    "symbolic link": "is a symbolic link to",
    "file": "is a folder; name a file in it",
    "folder": "is a file, not a folder",
}


@pytest.mark.parametrize("where", ["long name", "missing folder", "symbolic link", "other kind"])
@pytest.mark.parametrize(("module", "flag", "kind"), FLAGS, ids=[f"{m} {f}" for m, f, _ in FLAGS])
def test_an_output_path_that_cannot_be_used_is_refused_before_any_work(
    module, flag, kind, where, tmp_path, capsys
):
    path = bad_path(kind, where, tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exc:
        importlib.import_module(module).main([flag, str(path)])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "Traceback" not in err
    last = err.splitlines()[-1]
    assert flag in last and SAYS[kind if where == "other kind" else where] in last, last
    # nothing created, nothing followed: the link and what it names are as they were
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    if where == "symbolic link":
        assert path.is_symlink()
        target = path.resolve()
        assert target.is_dir() or target.read_text() == "the user's own file"


# ----------------------------------------------------------------------------- writing
def test_a_write_that_fails_leaves_the_previous_file_and_no_temporary_one(tmp_path, monkeypatch):
    path = tmp_path / "figures.json"
    out_path.write_json(path, {"previous": True})
    path.chmod(0o640)

    def full_disk(handle):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        out_path.write_bytes(path, b"the new figures")
    assert path.read_text() == '{\n "previous": true\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]
    monkeypatch.undo()
    out_path.write_text(path, "new")  # the file replaced keeps its permissions
    assert path.read_text() == "new" and path.stat().st_mode & 0o777 == 0o640


def test_a_model_file_is_written_under_the_name_given(tmp_path):
    """``np.savez`` added ``.npz`` to a name without it: the command wrote another file than
    the one its --out named and checked."""
    result = train(digits(8)[0][:200], 3, epochs=1, seed=0)
    save_training(result, tmp_path / "model", note="no suffix")
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert read_meta(tmp_path / "model")["note"] == "no suffix"


# ----------------------------------------------------------------------------- Ctrl-C
def test_a_stopped_training_resumes_to_the_model_of_an_uninterrupted_one():
    rows = digits(8)[0][:400]
    whole = train(rows, 4, epochs=5, seed=3)
    asked = []
    first = train(rows, 4, epochs=5, seed=3, stop=lambda: asked.append(1) or len(asked) >= 2)
    assert first.stopped == "interrupted after epoch 2 of 5" and first.resume is not None
    rest = train(rows, 4, epochs=5, seed=3, resume=first.resume)
    for name in ("W", "b_visible", "b_hidden"):
        assert torch.equal(getattr(rest.model, name), getattr(whole.model, name))
    assert [h["epoch"] for h in rest.history] == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="other data or with other arguments"):
        train(rows, 4, epochs=5, seed=4, resume=first.resume)


def test_resume_refuses_a_file_without_an_interrupted_training(tmp_path, capsys):
    out = tmp_path / "model.npz"
    args = ["--data", "digits-8x8", "--hidden", "2", "--epochs", "1", "--out", str(out)]
    assert train_command(args) == 0
    assert train_command([*args, "--resume"]) == 2
    assert "holds no interrupted training" in capsys.readouterr().err


def ignoring_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a script starts it


def started(command: list[str], ready: bytes, stream: str = "stderr") -> subprocess.Popen:
    """``command`` started in the background with SIGINT ignored, once ``ready`` is on its
    ``stream`` (read as it comes: a progress bar redraws without newlines)."""
    proc = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        preexec_fn=ignoring_sigint,
    )
    seen, deadline = b"", time.monotonic() + 120
    while ready not in seen:
        chunk = os.read(getattr(proc, stream).fileno(), 4096)
        assert chunk and time.monotonic() < deadline, seen.decode(errors="replace")
        seen += chunk
    return proc


def test_sigint_to_a_background_training_saves_it_and_resume_finishes_it(tmp_path):
    data = tmp_path / "rows.npy"
    np.save(data, digits(8)[0][:300])
    out, whole = tmp_path / "model.npz", tmp_path / "whole.npz"
    args = ["--data", str(data), "--hidden", "4", "--epochs", "200", "--batch-size", "100"]
    proc = started(["-m", "lsbcore.rbm.train", *args, "--out", str(out)], b"epoch 1/200")
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == 130 and "Traceback" not in err
    said = err.strip().splitlines()[-1]
    assert said.startswith("stopped by Ctrl-C (SIGINT) after epoch ") and "--resume" in said
    stopped_at = int(re.search(r"after epoch (\d+) of 200", said)[1])
    assert stopped_at < 200 and int(read_resume(out)["epoch"]) == stopped_at
    assert load_model(out).n_hidden == 4  # the model so far is a model file too

    assert train_command([*args, "--out", str(out), "--resume"]) == 0
    assert train_command([*args, "--out", str(whole)]) == 0
    resumed, uninterrupted = load_model(out), load_model(whole)
    assert torch.equal(resumed.W, uninterrupted.W)
    assert torch.equal(resumed.b_hidden, uninterrupted.b_hidden)
    with pytest.raises(ValueError, match="no interrupted training"):
        read_resume(out)  # finished: a plain model file


def test_sigint_to_any_background_command_stops_it_in_a_sentence(tmp_path):
    """A command without a resume of its own (the flow bias study, minutes long): status 130,
    one sentence, and its --json not written."""
    out = tmp_path / "bias.json"
    command = ["-m", "lsbcore.studies.flows.bias", "--train-steps", "100000", "--burn-in", "0"]
    proc = started([*command, "--json", str(out)], b"TV", stream="stdout")  # its table's header
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("python -m lsbcore.studies.flows.bias: stopped by Ctrl-C (SIGINT);")
    )
    assert not out.exists()


def test_every_command_runs_under_the_interrupt_rule():
    """Every entry point of lsbcore (an ``if __name__ == "__main__"`` block, a ``__main__.py``)
    goes through ``interrupt.run_command``, which handles SIGINT even when inherited ignored."""
    missed = []
    for path in sorted((ROOT / "lsbcore").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        blocks = [
            ast.unparse(node)
            for node in tree.body
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        ]
        if blocks and not any("interrupt.run_command(main" in block for block in blocks):
            if "runpy.run_module" not in "".join(blocks):  # lsbcore.experiment: an alias
                missed.append(path.relative_to(ROOT).as_posix())
    assert missed == ["lsbcore/backends/device/cross_compile.py"]  # a build check, no output
