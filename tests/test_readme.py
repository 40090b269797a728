"""Every command the README shows (each ``$ `` line of a ``console`` block) works as written, in order,
on a fresh copy of this repository: ``make run``, ``.venv/bin/xlalint``, ``pip install .``,
``pipx install .``, ``flake8``, ``xlalint --verify``. A trailing ``# exit N`` is the expected status
(0 otherwise).

The copy holds what ``git ls-files`` lists (what a clone has, plus files not committed yet). HOME is
a temporary directory, so pipx installs there; "the environment you train in" is a fresh virtualenv
made here, and pipx itself is installed into it first (the README assumes the user has pipx).
``xlalint --verify`` needs the verify extra (7 GB), so those two commands run with the xlalint of the
environment running the tests, which has it (``make test`` installs it), from the copy's sources.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT

README = ROOT / "README.md"
EXIT = re.compile(r"#\s*exit\s+(\d+)")


def readme_commands() -> list:
    """(command, expected exit status) for each ``$ `` line of the README's console blocks."""
    out, in_console = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_console = line.strip() == "```console" and not in_console
            continue
        if in_console and line.startswith("$ "):
            m = EXIT.search(line)
            out.append((line[2:].strip(), int(m.group(1)) if m else 0))
    return out


def test_the_readme_shows_the_commands_this_test_runs():
    commands = [c for c, _ in readme_commands()]
    assert commands[0] == "make run"
    for needed in ("pip install .", "pipx install .", ".venv/bin/xlalint examples/slow_train.py"):
        assert any(c.startswith(needed) for c in commands), needed
    text = README.read_text(encoding="utf-8")
    assert "pip install xlalint" not in text and "rev: v0" not in text  # neither exists


def _copy_of_the_repository(dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def test_every_readme_command_works_as_written(tmp_path):
    clone = _copy_of_the_repository(tmp_path / "xlalint")
    home = tmp_path / "home"
    home.mkdir()
    env_dir = tmp_path / "train-env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    r = subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "pipx"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NO_COLOR", "FORCE_COLOR")}
    env = {**base, "HOME": str(home), "VIRTUAL_ENV": str(env_dir),
           "PATH": os.pathsep.join([str(env_dir / "bin"), str(home / ".local" / "bin"), base.get("PATH", "")])}
    verify_env = {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
                  "PYTHONPATH": os.pathsep.join([str(clone), str(clone / "plugins")]), "PJRT_DEVICE": "CPU"}
    log = []
    for command, expected in readme_commands():
        if command.startswith("make test"):
            continue  # the command that runs this test
        e = verify_env if command.startswith("xlalint --verify") else env
        t0 = time.monotonic()
        r = subprocess.run(["bash", "-c", command], cwd=clone, env=e, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=900)
        log.append(f"$ {command}  -> exit {r.returncode} in {time.monotonic() - t0:.0f} s")
        assert r.returncode == expected, "\n".join(log) + f"\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        if command == "make run":
            assert "Found 8 findings in 1 file checked." in r.stdout and "All checks passed (1 file checked)." in r.stdout
            assert ".venv/bin/xlalint" in r.stdout.split("Next:")[1]
    print("\n".join(log))  # shown with -s, and in the report of a failure above
    assert (home / ".local" / "bin" / "xlalint").exists()  # pipx put it there
    assert (env_dir / "bin" / "xlalint").exists()  # pip install . put it there


def test_the_readmes_local_pre_commit_hook_works_and_honours_excludes(tmp_path):
    """The README's `repo: local` snippet, verbatim, in a user's repository: pre-commit runs the
    `xlalint` on the PATH on the committed files, and the project's bare-name exclude keeps
    `third_party/` out even though pre-commit names its files (the hook runs --force-exclude)."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"```yaml\n(repos:\n  - repo: local\n.*?)```", text, re.DOTALL)
    assert m, "the README's local hook snippet"
    slow = "import torch\nfor x in loader:\n    loss = model(x).sum()\n    v = loss.item()\n"
    (tmp_path / ".pre-commit-config.yaml").write_text(m.group(1))
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nextend-exclude = ["third_party"]\n')
    (tmp_path / "third_party" / "vendored").mkdir(parents=True)
    (tmp_path / "third_party" / "vendored" / "slow.py").write_text(slow)
    (tmp_path / "ok.py").write_text("import torch\nx = torch.zeros(3)\n")
    git_env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t.invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    env = {**os.environ, **git_env, "PRE_COMMIT_HOME": str(tmp_path / ".pre-commit-home"), "PRE_COMMIT_COLOR": "never",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True)
    pre_commit = str(Path(sys.executable).parent / "pre-commit")
    r = subprocess.run([pre_commit, "run", "--all-files"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr  # third_party/ is excluded: nothing to report
    (tmp_path / "train.py").write_text(slow)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, env=env, check=True, capture_output=True)
    r = subprocess.run([pre_commit, "run", "--all-files"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--> train.py:4:9" in r.stdout and "third_party" not in r.stdout, r.stdout
