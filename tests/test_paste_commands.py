"""Every command rlzoo prints for a user to paste is shell-quoted: a run dir with a hostile name
(spaces, ``;``, ``$(...)``, backticks, quotes, a newline, ``!``, a non-UTF-8 byte) gives a
resume hint that, pasted into bash, resumes exactly that dir and runs nothing else, also after
the message was folded onto one line."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, TINY, cli_env, read_summary, run_cli

from rlzoo.errors import exit_with, python_str, resume_command, shell_quote

HOSTILE = ["plain", "a b", "a  b", " lead", "trail ", "semi;colon", "$(touch PWNED)",
           "`touch PWNED`", "it's", 'say "hi"', "new\nline", "tab\there", "bang!x",
           "back\\slash", "esc\x1b[31mred", "nbsp\xa0x", "é ü", os.fsdecode(b"byte\xffname"),
           "*?[a]", "~user", "-rf", "", "cr\rlf", "x'\n$(touch PWNED)'", "a=b", "{a,b}"]


def pasted(command: str, cwd: Path) -> list[bytes]:
    """The words bash gives the program of ``command`` (``python ...``), as bytes, with
    ``python`` a function that only prints them."""
    script = 'python() { printf "%s\\0" "$@"; }\n' + command
    out = subprocess.run(["bash", "-c", script], capture_output=True, cwd=cwd, check=True)
    return out.stdout.split(b"\0")[:-1]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_quoted_word_pastes_back_as_itself_and_runs_nothing(name: str, tmp_path: Path,
                                                              capsys) -> None:
    command = resume_command(f"/runs/{name}", "total_steps=5")
    folded = " ".join(command.split())  # what one-line messages (exit_with) do to it
    for text in (command, folded):
        assert pasted(text, tmp_path) == [b"-m", b"rlzoo.train",
                                          os.fsencode(f"resume=/runs/{name}"), b"total_steps=5"]
    assert "\n" not in command and command.isprintable()
    with pytest.raises(SystemExit):
        exit_with(f"something; continue with: {command}")
    line = capsys.readouterr().err.strip()
    assert line.endswith(command) and "\n" not in line
    assert ast.literal_eval(" ".join(python_str(name).split())) == name
    assert pasted(f"python {shell_quote(name)}", tmp_path) == [os.fsencode(name)]
    assert list(tmp_path.iterdir()) == []  # nothing ran: no PWNED


def words_after(marker: str, line: str) -> str:
    return line.split(marker, 1)[1]


def test_a_hostile_run_dir_prints_hints_that_resume_exactly_it(tmp_path: Path) -> None:
    """A run moved to a hostile name: stopped by SIGTERM, its stop line's command pasted into
    bash continues exactly that dir; finished, its 'to train further' hint names it too."""
    base = tmp_path / "base"
    args = ["algo=sac", "env=Pendulum", *TINY, "algo.learning_starts=50", "eval.episodes=1",
            "log.progress=false"]
    assert run_cli([*args, "total_steps=100"], base).returncode == 0
    hostile = tmp_path / "my  runs; $(touch PWNED) `touch PWNED` 'q' \"d\"\nline!"
    base.rename(hostile)
    here = tmp_path / "cwd"
    here.mkdir()
    proc = run_cli(["--at=rlzoo.run.collect:Collector.collect", f"resume={hostile}",
                    "total_steps=130"], module="tests.signal_moments", cwd=here)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stop = [x for x in proc.stderr.split("\n") if x.startswith("rlzoo: stopped by SIGTERM")]
    assert len(stop) == 1, proc.stderr
    command = words_after("continue with: ", stop[0])
    assert pasted(command, here) == [b"-m", b"rlzoo.train", os.fsencode(f"resume={hostile}")]
    checkpoint = re.search(r"; checkpoint (.+?); continue", stop[0]).group(1)  # type: ignore[union-attr]
    assert pasted(f"python {checkpoint}", here) == [os.fsencode(hostile / "checkpoints" /
                                                                "step_0000000101.pt")]
    resumed = subprocess.run(["bash", "-c", command], cwd=here, env=cli_env(),
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert read_summary(hostile)["total_steps"] == 130
    again = run_cli([f"resume={hostile}"], cwd=here)
    assert again.returncode == 0 and "already finished" in again.stderr
    hint = words_after("To train further: ", again.stderr.strip()).split(" total_steps=N")[0]
    assert pasted(hint, here) == [b"-m", b"rlzoo.train", os.fsencode(f"resume={hostile}")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cwd", hostile.name])
    assert list(here.iterdir()) == []  # nothing ran: no PWNED


PRINTED = re.compile(
    r"""f["'][^"'\n]*(?:resume=|rlzoo\.(?:evaluate|compare|train) )\{(?!shell_quote\()""")


def test_no_printed_command_interpolates_an_unquoted_path() -> None:
    """The one place a command line is put together from a path is rlzoo.errors (the argv
    lists rlzoo runs itself are no text to paste)."""
    allowed = {"rlzoo/errors.py", "tools/reproduce/rlzoo_cells.py"}
    found = [f"{path.relative_to(REPO)}:{n}"
             for path in sorted((REPO / "rlzoo").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if PRINTED.search(line) and str(path.relative_to(REPO)) not in allowed]
    assert found == []


@pytest.mark.parametrize("name", ["a\\b", "it's\\", "x\\'y"])
def test_a_run_dir_named_with_backslashes_is_that_dir(name: str, tmp_path: Path) -> None:
    """hydra.run.dir with backslashes (Hydra's grammar escapes only a quote or the backslashes
    before one) trains into exactly that dir, records it as its group's home, and resumes."""
    run = tmp_path / name
    args = ["algo=sac", "env=Pendulum", "algo.learning_starts=50", "eval.every=0",
            "checkpoint.every=50", "torch_threads=1", *TINY]
    from rlzoo.launch.claim import run_dir_override

    # as typed (a quote needs Hydra's quoting, as rlzoo's own override writes it)
    given = f"hydra.run.dir={run}" if "'" not in name else run_dir_override(run)
    proc = run_cli([*args, "total_steps=100", given])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert (run / "summary.json").is_file() and not (run / ".rlzoo.lock").exists()
    again = run_cli([f"resume={run}", "total_steps=150"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_summary(run)["total_steps"] == 150
