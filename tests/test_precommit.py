"""The pre-commit hooks, run by the real ``pre-commit`` against a commit of this working tree.

pre-commit installs a hook repository from git, so the working tree (with whatever is not committed
yet) is copied into a temporary repository and committed. One PRE_COMMIT_HOME serves the whole session:
the hook's virtualenv (xlalint + libcst from PyPI) is built once and reused by every test here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRE_COMMIT = str(Path(sys.executable).parent / "pre-commit")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "xlalint tests", "GIT_AUTHOR_EMAIL": "tests@xlalint.invalid",
    "GIT_COMMITTER_NAME": "xlalint tests", "GIT_COMMITTER_EMAIL": "tests@xlalint.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}

SLOW = textwrap.dedent("""\
    import torch
    import torch_xla

    device = torch_xla.device()
    model = torch.nn.Linear(16, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    for step in range(10):
        loss = model(torch.randn(32, 16, device=device)).sum()
        loss.backward()
        opt.step()
        total += loss.item()
        torch_xla.sync()
""")
FAST = SLOW.replace("total = 0.0", "total = torch.zeros((), device=device)").replace(
    "total += loss.item()", "total += loss.detach()") + "print(total.item())\n"


def git(*args, cwd) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    """A git repository holding this working tree as one commit (what try-repo installs from)."""
    repo = tmp_path_factory.mktemp("xlalint-hook-repo")
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / rel)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "--no-verify", "-m", "snapshot of the working tree", cwd=repo)
    return repo, git("rev-parse", "HEAD", cwd=repo).strip()


@pytest.fixture(scope="session")
def pre_commit_env(tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture
def project(tmp_path) -> Path:
    """A user's repository with a slow training script and its fixed twin."""
    (tmp_path / "train_slow.py").write_text(SLOW)
    (tmp_path / "train_fast.py").write_text(FAST)
    git("init", "-q", "-b", "main", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-q", "--no-verify", "-m", "training scripts", cwd=tmp_path)
    return tmp_path


def pre_commit(*args, cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run([PRE_COMMIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_manifest_is_valid():
    proc = subprocess.run([PRE_COMMIT, "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_try_repo_fails_on_the_slow_file(hook_repo, pre_commit_env, project):
    """What a user runs to try the hook before adding it. try-repo builds its hook env in a
    throw-away store (it ignores PRE_COMMIT_HOME), so it runs once here; the rest use a config."""
    repo, _ = hook_repo
    proc = pre_commit("try-repo", str(repo), "xlalint", "--files", "train_slow.py", cwd=project, env=pre_commit_env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Failed" in out, out
    line = SLOW.splitlines().index("    total += loss.item()") + 1
    assert f"train_slow.py:{line}:" in out and "XLA001" in out, out


@pytest.fixture
def configured(hook_repo, project) -> Path:
    """The project with the .pre-commit-config.yaml of the README (both hooks)."""
    repo, rev = hook_repo
    (project / ".pre-commit-config.yaml").write_text(textwrap.dedent(f"""\
        repos:
          - repo: {repo}
            rev: {rev}
            hooks:
              - id: xlalint
              - id: xlalint-verify
                additional_dependencies: []  # see the verify test
                args: [train_slow.py, --max-steps, "3", --timeout, "60"]
    """))
    git("add", "-A", cwd=project)
    git("commit", "-q", "--no-verify", "-m", "pre-commit config", cwd=project)
    return project


def test_the_installed_hook_fails_on_the_slow_file_and_passes_on_the_fixed_one(configured, pre_commit_env):
    slow = pre_commit("run", "xlalint", "--files", "train_slow.py", cwd=configured, env=pre_commit_env)
    assert slow.returncode == 1, slow.stdout + slow.stderr
    assert "XLA001" in slow.stdout

    fast = pre_commit("run", "xlalint", "--files", "train_fast.py", cwd=configured, env=pre_commit_env)
    assert fast.returncode == 0, fast.stdout + fast.stderr
    assert "Passed" in fast.stdout


def test_the_hook_honours_the_projects_excludes(configured, pre_commit_env):
    """pre-commit names files one by one; the project's extend-exclude still applies (--force-exclude)."""
    (configured / "pyproject.toml").write_text('[tool.xlalint]\nextend-exclude = ["train_slow.py"]\n')
    proc = pre_commit("run", "xlalint", "--files", "train_slow.py", cwd=configured, env=pre_commit_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_verify_hook_is_manual_and_takes_its_target_from_args(configured, pre_commit_env):
    """Wiring only: the hook runs in the manual stage only, with the target from `args`. torch is not
    installed into the hook's env here (a GB download): the program's failure to start is the
    expected verdict, and the report names the target, so it reached --verify as its TARGET."""
    default = pre_commit("run", "--files", "train_fast.py", cwd=configured, env=pre_commit_env)
    assert default.returncode == 0, default.stdout + default.stderr
    assert "xlalint --verify" not in default.stdout  # not in the commit stage

    manual = pre_commit("run", "xlalint-verify", "--hook-stage", "manual", cwd=configured, env=pre_commit_env)
    out = manual.stdout + manual.stderr
    assert "xlalint --verify train_slow.py" in out, out
    assert manual.returncode != 0, out  # no torch in this env: the program cannot be run
