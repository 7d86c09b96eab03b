"""The README works as written: every command and snippet in it runs.

The README's fenced code blocks are read by language:

``python``
    Each block is written to a file and run as a script (``python block.py``) in a
    scratch folder that links the repository's ``models/``, so its relative paths work
    as they do from the repository root, and whatever it writes lands in the scratch
    folder.
``bash``
    Each ``pemc-stan ...`` command (a segment between ``&&``) runs through
    :func:`pemc_stan.cli.main` in such a scratch folder and must exit with 0, or with 8
    (a suspect verdict) for the commands that judge a fit. The rest of a line is the
    install (``python3 -m venv``, ``pip install``), which is what CI itself does, or the
    test command, which must be the one ``.ci/run`` runs.
``toml``
    A batch file: its first line is a comment naming it (``# fits.toml: ...``); it is
    written into every scratch folder before the blocks run.
``text``
    Output shown as is: not run.

A block in any other language fails :func:`test_every_block_has_a_known_language`, so a
new kind of block needs a decision here. The fast tests check the README's length and
that every relative link of the README and of ``docs/`` exists, anchors included.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The README is a user's page: at most this many lines (the rest is in docs/).
MAX_LINES = 250
#: Languages of fenced blocks and what is done with them.
RUN, WRITE, SHOW = "run", "write", "show"
LANGUAGES = {"python": RUN, "bash": RUN, "toml": WRITE, "text": SHOW}
#: Commands of a bash block that are not run here: the install, which CI itself does.
INSTALL = ("python3 -m venv ", ". .venv/bin/activate", "pip install ")
#: Commands that judge a fit, which exit with 8 when its verdict is suspect.
JUDGING = ("sample", "evidence", "batch")
#: How long one snippet may take (each runs a few small fits from the model cache).
SNIPPET_TIMEOUT = 600

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def fenced_blocks(text: str) -> list[tuple[str, str, int]]:
    """``(language, body, line)`` of every fenced block of ``text``, in order."""
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in _FENCE.finditer(text)]


def _without_blocks(text: str) -> str:
    """``text`` with its fenced blocks blanked (their lines kept, so line numbers hold)."""
    return _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _blocks(language: str) -> list[tuple[str, int]]:
    return [(body, line) for lang, body, line in fenced_blocks(README.read_text())
            if lang == language]


def bash_commands(body: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments dropped, each
    ``&&`` segment one command."""
    joined = re.sub(r"\\\n", " ", body)
    out = []
    for line in joined.splitlines():
        segment: list[str] = []
        for word in [*shlex.split(line, comments=True), "&&"]:
            if word != "&&":
                segment.append(word)
            elif segment:
                out.append(shlex.join(segment))
                segment = []
    return out


def _pemc_stan_commands() -> list[Any]:
    return [pytest.param(command, id=command[:70])
            for body, _ in _blocks("bash") for command in bash_commands(body)
            if command.startswith("pemc-stan ")]


def _python_snippets() -> list[Any]:
    return [pytest.param(body, id=f"README.md:{line}") for body, line in _blocks("python")]


def _toml_files() -> dict[str, str]:
    """The README's batch files: name (from the first line's comment) -> text."""
    files = {}
    for body, line in _blocks("toml"):
        m = re.match(r"#\s*([\w.-]+\.toml)\b", body)
        assert m, f"README.md:{line}: a toml block starts with a comment naming its file"
        files[m.group(1)] = body
    return files


def scratch_folder(tmp_path: Path) -> Path:
    """A folder where the README's relative paths work: ``models/`` linked, the README's
    batch files written."""
    folder = tmp_path / "readme"
    folder.mkdir()
    (folder / "models").symlink_to(ROOT / "models", target_is_directory=True)
    for name, text in _toml_files().items():
        (folder / name).write_text(text)
    return folder


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in _HEADING.findall(_without_blocks(path.read_text()))}


# --------------------------------------------------------------------------- fast checks


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_LINES}): move details to docs/")


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_exists(page: Path) -> None:
    missing = []
    for target in _LINK.findall(_without_blocks(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            missing.append(f"{target}: no {path_part}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            missing.append(f"{target}: no heading #{anchor} in {path.name}")
    assert not missing, f"{page.name}: broken links:\n" + "\n".join(missing)


def test_every_block_has_a_known_language() -> None:
    unknown = [f"README.md:{line}: ```{lang or '(none)'}"
               for lang, _, line in fenced_blocks(README.read_text()) if lang not in LANGUAGES]
    assert not unknown, ("blocks this test does not know how to check (python, bash, toml "
                         "or text):\n" + "\n".join(unknown))


def test_every_bash_command_is_run_or_is_the_install() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    ci_pytest = [line.strip() for line in ci.splitlines() if line.strip().startswith("pytest")]
    others = []
    for body, line in _blocks("bash"):
        for command in bash_commands(body):
            if command.startswith("pemc-stan ") or command.startswith(INSTALL):
                continue
            if command.startswith("pytest"):
                assert command in ci_pytest, (
                    f"README.md:{line}: the test command {command!r} is not what .ci/run "
                    f"runs ({ci_pytest})")
                continue
            others.append(f"README.md:{line}: {command}")
    assert not others, "bash commands this test would not run:\n" + "\n".join(others)


def test_the_main_command_output_is_marked() -> None:
    """The lead refreshes the main command's output between these markers."""
    text = README.read_text()
    start, end = text.find("<!-- main-command-output -->"), text.find(
        "<!-- /main-command-output -->")
    assert 0 <= start < end, "the markers around the main command's output"
    assert [lang for lang, _, _ in fenced_blocks(text[start:end])] == ["text"]


def test_the_blocks_were_found() -> None:
    """The parsing above sees the README's snippets (a broken fence would hide them)."""
    assert len(_python_snippets()) >= 3
    assert any("example:bimodal_1d --method ct --seed 1 --output-dir bimodal_ct"
               in p.values[0] for p in _pemc_stan_commands())
    assert "fits.toml" in _toml_files()


# --------------------------------------------------------------------------- running them


@pytest.mark.compiled
@pytest.mark.parametrize("snippet", _python_snippets())
def test_the_python_snippet_runs(snippet: str, tmp_path: Path,
                                 cmdstan_installation: object) -> None:
    folder = scratch_folder(tmp_path)
    script = folder / "snippet.py"
    script.write_text(snippet)
    from pemc_stan.backend.runtime import cache_root

    # a fresh user cache, as on a first day: ArviZ's once-a-day banner would show there
    env = {**os.environ, "MPLBACKEND": "Agg", "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PEMC_STAN_CACHE": str(cache_root())}
    proc = subprocess.run([sys.executable, str(script)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=SNIPPET_TIMEOUT)
    assert proc.returncode == 0, (
        f"the snippet failed (exit {proc.returncode}):\n{snippet}\n--- stderr (end):\n"
        f"{proc.stderr[-4000:]}")
    noise = ("INFO", "RuntimeWarning", "ERROR", "ArviZ is undergoing")
    chatter = [line for line in (proc.stdout + proc.stderr).splitlines()
               if any(word in line for word in noise)]
    assert not chatter, ("the Python API printed INFO, RuntimeWarning, ERROR or ArviZ "
                         "banner lines:\n" + "\n".join(chatter[:10]))


@pytest.mark.compiled
@pytest.mark.parametrize("command", _pemc_stan_commands())
def test_the_command_runs(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          cmdstan_installation: object) -> None:
    from pemc_stan.cli import main

    argv = shlex.split(command)[1:]
    if argv[0] == "batch" and sys.version_info < (3, 11):
        pytest.skip("TOML batch files need Python >= 3.11 (tomllib)")
    monkeypatch.chdir(scratch_folder(tmp_path))
    code = main(argv)
    allowed = (0, 8) if argv[0] in JUDGING else (0,)
    assert code in allowed, f"{command}: exit code {code}, expected one of {allowed}"
