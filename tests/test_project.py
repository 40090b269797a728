"""The analysis crosses files: multi-module fixture projects, linted whole and one file at a time,
with one job or two, cold and from a cache that a caller's edit must invalidate (issue #12).

Each project in tests/fixtures/projects has its own pyproject.toml (its root) and ``# expect:`` marks
in whichever module the finding belongs to; ``lookalikes`` has none and must lint clean.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from xlalint.analysis import decision
from xlalint.analysis.module import analyse_module, declare
from xlalint.run import memory, pool, store
from xlalint.run.inputs import Inputs
from xlalint.run.project import lint_files, lint_project
from xlalint.sources.discover import iter_python_files
from xlalint.run.cache import Cache
from xlalint.config import build_settings
from xlalint.findings import finding_row
from tests.test_fixtures import expected_marks

PROJECTS = Path(__file__).resolve().parent / "fixtures" / "projects"
NAMES = sorted(p.name for p in PROJECTS.iterdir() if (p / "pyproject.toml").is_file())

# Marks the analysis does not reach yet, with the reason; each is real (``--verify`` measures it).
KNOWN_MISSES: dict = {}


def _settings():
    return build_settings(None)  # no config: the defaults, as `--isolated`


def _files(root: Path) -> list[str]:
    return [str(p) for p in iter_python_files([str(root)], _settings())]


def _found(findings, root: Path) -> set:
    return {(str(Path(f.path).resolve().relative_to(root.resolve())), f.line, f.code) for f in findings}


def _marks(name: str) -> set:
    root = PROJECTS / name
    out = set()
    for f in _files(root):
        rel = str(Path(f).relative_to(root))
        out |= {(rel, line, code) for line, code in expected_marks(Path(f).read_text())}
    return out


def test_there_are_projects():
    assert len(NAMES) >= 4 and "lookalikes" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_whole_project_matches_the_marks(name):
    root = PROJECTS / name
    found = _found(lint_files(_files(root), _settings(), jobs=1, cache=None), root)
    expected = _marks(name)
    known = {m for m in expected if (name, m[0], m[1]) in KNOWN_MISSES}
    assert found - expected == set(), "findings without a mark (false positives)"
    assert expected - known - found == set(), "marks not found"
    assert known & found == set(), "a known miss is found now: remove it from KNOWN_MISSES"


@pytest.mark.parametrize("name", NAMES)
def test_one_file_at_a_time_gives_the_same_findings(name):
    root = PROJECTS / name
    whole = lint_files(_files(root), _settings(), jobs=1, cache=None)
    for f in _files(root):
        alone = lint_files([f], _settings(), jobs=1, cache=None)
        assert alone == [x for x in whole if x.path == f], f


@pytest.mark.parametrize("name", NAMES)
def test_jobs_give_the_same_findings(name):
    root = PROJECTS / name
    files = _files(root)
    assert lint_files(files, _settings(), jobs=2, cache=None) == lint_files(
        files, _settings(), jobs=1, cache=None)


def test_a_callers_edit_changes_the_helpers_cached_findings(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(PROJECTS / "seq2seq_returns", root)
    helper = str(root / "reporting.py")
    cache_dir = tmp_path / "cache"

    def lint_helper():
        cache = Cache.open(cache_dir, _settings(), pytest.fail)
        return [(f.line, f.code) for f in lint_files([helper], _settings(), jobs=1, cache=cache)], cache

    before, _ = lint_helper()
    assert before == [(6, "XLA006")]
    warm, cache = lint_helper()
    assert warm == before and cache.misses == 0
    # the caller now passes Python floats: the helper formats no tensor
    train = root / "train.py"
    text = train.read_text()
    edited = text.replace('log_scalar("loss", loss, step)', 'log_scalar("loss", loss.item(), step)').replace(
        'log_scalar("grad_norm", grad_norm, step)', 'log_scalar("grad_norm", 0.0, step)')
    assert edited != text
    train.write_text(edited)
    after, _ = lint_helper()
    assert after == []
    # and back: the earlier analysis is served from the cache again
    train.write_text(text)
    again, cache = lint_helper()
    assert again == before and cache.misses == 0


def test_an_unchanged_project_is_served_whole_from_the_cache(tmp_path, monkeypatch):
    # a warm run over an unchanged project walks nothing and solves no facts (bench: a warm run over
    # torch was 24% of a cold one while it replayed every round from the per-file entries); any edit,
    # in any module, walks again
    root = tmp_path / "proj"
    shutil.copytree(PROJECTS / "seq2seq_returns", root)
    cache_dir = tmp_path / "cache"

    def lint():
        cache = Cache.open(cache_dir, _settings(), pytest.fail)
        return _found(lint_files(_files(root), _settings(), jobs=1, cache=cache), root)

    cold = lint()
    assert cold
    walked = []
    real = pool.analyse_one
    monkeypatch.setattr(pool, "analyse_one", lambda *a, **k: walked.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(store, "declarations", lambda *a, **k: pytest.fail("declarations read on a warm run"))
    assert lint() == cold and walked == []
    # one file of it, spelled from inside the project: the same entry (paths are stored under the root)
    monkeypatch.chdir(root)
    cache = Cache.open(cache_dir, _settings(), pytest.fail)
    one = lint_files(["reporting.py"], _settings(), jobs=1, cache=cache)
    assert {(f.line, f.code) for f in one} == {(line, code) for path, line, code in cold if path == "reporting.py"}
    assert one and walked == []
    # an edit of the caller: the project changed, its modules are read and walked again
    monkeypatch.undo()
    monkeypatch.setattr(pool, "analyse_one", lambda *a, **k: walked.append(a[0]) or real(*a, **k))
    train = root / "train.py"
    train.write_text(train.read_text().replace('log_scalar("loss", loss, step)', 'log_scalar("loss", loss.item(), step)'))
    edited = lint()
    assert walked and edited != cold
    # one entry per project, rewritten by each whole run: a cache does not grow with every edit
    assert len([e for e in cache_dir.rglob("*p") if e.is_file()]) == 1


def test_a_one_file_run_over_an_unchanged_project_decides_nothing(tmp_path, monkeypatch):
    # pre-commit and editors lint one file of a project linted before: its findings, as the last run over
    # the same project state decided them, are read back (deciding the whole call graph was most of a
    # warm one-file run on torch); from another directory, or after any edit, they are decided again
    root = tmp_path / "proj"
    shutil.copytree(PROJECTS / "seq2seq_returns", root)
    cache_dir = tmp_path / "cache"
    monkeypatch.chdir(root)

    def lint(paths):
        return lint_files(paths, _settings(), jobs=1, cache=Cache.open(cache_dir, _settings(), pytest.fail))

    whole = lint(_files(Path(".")))
    mine = [f for f in whole if Path(f.path).name == "reporting.py"]
    assert mine and any("called from" in f.message for f in mine)  # a message that names another file
    real_decide = decision.decide
    monkeypatch.setattr(decision, "decide", lambda *a, **k: pytest.fail("decided again on an unchanged project"))
    assert lint(["reporting.py"]) == mine
    assert lint(["./reporting.py", "train.py"]) == sorted(
        [f.__class__("./reporting.py", *finding_row(f)) for f in mine] + [f for f in whole if f.path == "train.py"])
    # from elsewhere the messages name other paths: decided again, as a run without a cache decides
    monkeypatch.setattr(decision, "decide", real_decide)
    monkeypatch.chdir(tmp_path)
    fresh = lint_files(["proj/reporting.py"], _settings(), jobs=1, cache=None)
    assert lint(["proj/reporting.py"]) == fresh and fresh != mine
    assert any("proj/train.py" in f.message for f in fresh)
    # an edit anywhere in the project: decided again
    monkeypatch.chdir(root)
    train = root / "train.py"
    train.write_text(train.read_text().replace('log_scalar("loss", loss, step)', 'log_scalar("loss", loss.item(), step)'))
    decided = []
    monkeypatch.setattr(decision, "decide", lambda *a, **k: decided.append(1) or real_decide(*a, **k))
    assert lint(["reporting.py"]) == lint_files(["reporting.py"], _settings(), jobs=1, cache=None)
    assert decided


def test_a_buffer_that_differs_from_the_disk_is_what_is_linted(tmp_path):
    # a host that passes the text of a file (an editor's buffer, stdin) over a project whose files on
    # disk are all cached: the buffer is the project's state, never the file it stands for
    root = tmp_path / "proj"
    shutil.copytree(PROJECTS / "seq2seq_returns", root)
    cache_dir = tmp_path / "cache"
    files = _files(root)
    lint_files(files, _settings(), jobs=1, cache=Cache.open(cache_dir, _settings(), pytest.fail))
    train = str(root / "train.py")
    text = Path(train).read_text().replace('log_scalar("loss", loss, step)', 'log_scalar("loss", loss.item(), step)')
    assert text != Path(train).read_text()
    on_disk = lint_project(str(root), [train], _settings(), files=files)
    with_cache = lint_project(str(root), [train], _settings(), files=files, sources={train: text},
                                       cache=Cache.open(cache_dir, _settings(), pytest.fail))
    without = lint_project(str(root), [train], _settings(), files=files, sources={train: text})
    assert with_cache == without != on_disk


@pytest.mark.parametrize("name", sorted(p.name for p in PROJECTS.iterdir() if p.is_dir()))
def test_facts_updated_in_place_answer_as_facts_built_afresh(name, monkeypatch):
    # the project pass updates its facts after each level (Facts.update keeps what cannot have changed);
    # every answer it then holds must be what facts built from the same summaries would answer
    from xlalint.semantics.project import Facts, FactsView

    real = Facts.update
    checked = []

    def update(self, changes):
        real(self, changes)
        fresh = Facts(self.index, dict(self.summaries))
        for k in list(self._answers):
            module, key = k if isinstance(k, tuple) else ("", k)
            assert FactsView(fresh, module).answer(key) == self._answers[k], (name, k)
            checked.append(k)

    monkeypatch.setattr(Facts, "update", update)
    root = PROJECTS / name
    lint_files(_files(root), _settings(), jobs=1, cache=None)
    assert checked


def test_the_path_is_named_in_the_message():
    root = PROJECTS / "classifier_pkg"
    found = lint_files([str(root / "utils" / "metrics.py")], _settings(), jobs=1, cache=None)
    assert found and all("called from" in f.message and "train.py:" in f.message for f in found)


def test_flake8_sees_the_project(tmp_path):
    """flake8 checks one file at a time: the plugin still reads the modules around it."""
    import subprocess
    import sys

    root = tmp_path / "proj"
    shutil.copytree(PROJECTS / "seq2seq_returns", root)
    out = subprocess.run([sys.executable, "-m", "flake8", "--select", "XLA", "reporting.py"], cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("reporting.py:6:11: XLA006 "), out.stdout + out.stderr
    assert "called from train.py:71" in out.stdout


def _project(root: Path, files: dict) -> None:
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _lint(root: Path, files=None) -> set:
    asked = [str(root / f) for f in files] if files else _files(root)
    return _found(lint_files(asked, _settings(), jobs=1, cache=None), root)


def test_a_star_import_of_a_project_module_is_followed(tmp_path):
    root = tmp_path / "proj"
    _project(root, {
        "utils.py": "def accuracy(scores, targets, k):\n"
                    "    correct = scores.topk(k, 1)[1].eq(targets.view(-1, 1)).sum()\n"
                    "    return correct.item() * 100.0 / targets.size(0)\n"
                    "\n\ndef _private(x):\n    return x.item()\n",
        "train.py": "import torch_xla\nfrom utils import *\n\n\n"
                    "def train(model, loader, opt):\n"
                    "    for x, y in loader:\n"
                    "        scores = model(x)\n"
                    "        scores.sum().backward()\n"
                    "        opt.step()\n"
                    "        top5 = accuracy(scores, y, 5)\n"
                    "        torch_xla.sync()\n",
    })
    assert _lint(root) == {("utils.py", 3, "XLA001")}
    assert _lint(root, ["utils.py"]) == {("utils.py", 3, "XLA001")}


def test_a_star_reexport_resolves_before_any_walk(tmp_path):
    # `pkg/__init__.py` re-exports `pkg/core.py` with a star import (torch_xla's own layout): names
    # reached through the package resolve from the declarations already, so the walk order puts
    # core.py before train.py and train.py reads core's walked return the first time
    from xlalint.semantics.project import Facts, ProjectIndex, dependency_levels

    root = tmp_path / "proj"
    _project(root, {
        "pkg/__init__.py": "from .core import *\n",
        "pkg/core.py": "import torch\n\n\ndef make_mask(x):\n    return x > 0\n\n\ndef _hidden(x):\n    return x\n",
        "train.py": "import torch_xla\nimport pkg\n\n\n"
                    "def train(model, loader, opt):\n"
                    "    for x, y in loader:\n"
                    "        out = model(x)\n"
                    "        out.sum().backward()\n"
                    "        opt.step()\n"
                    "        keep = pkg.make_mask(out)\n"
                    "        picked = out[keep].mean()\n"
                    "        torch_xla.sync()\n",
    })
    files = _files(root)
    index = ProjectIndex(str(root), files)
    decls = {p: store.declarations(p, index, Inputs(_settings()), None) for p in files}
    facts = Facts(index, {d["summary"]["module"]: d["summary"] for d in decls.values()})
    assert facts.resolve("pkg.make_mask", "train") == ("func", "pkg.core:make_mask")
    assert facts.resolve("pkg._hidden", "train") is None  # a star import binds public names only
    levels = {Path(p).relative_to(root).as_posix(): lv for p, lv in dependency_levels(index, decls).items()}
    assert levels["pkg/core.py"] < levels["train.py"]
    assert _lint(root) == {("train.py", 11, "XLA003")}


def test_a_cycle_of_modules_is_walked_callees_first(tmp_path, monkeypatch):
    # torch's layout: a package's __init__ calls into its submodules and they call back into it, so the
    # three share a cycle. Inside it, ops.py (which the other two call) is walked first and layers.py
    # reads ops's walked return the first time
    from xlalint.semantics.project import ProjectIndex, dependency_levels

    root = tmp_path / "proj"
    _project(root, {
        "pkg/__init__.py": "import torch\nfrom pkg import layers, ops\n\n\n"
                           "def on_device(x):\n    return x.device.type == 'xla'\n\n\n"
                           "def setup(model):\n    ops.prepare(model)\n    return layers.build(model)\n",
        "pkg/ops.py": "import torch\nimport pkg\n\n\ndef prepare(model):\n    return model\n\n\n"
                      "def masked_mean(x, keep):\n    if pkg.on_device(x):\n        x = x * 1\n"
                      "    return x.sum() / keep.sum()\n",
        "pkg/layers.py": "import pkg\nfrom pkg import ops\n\n\ndef build(model):\n    return model\n\n\n"
                         "def masked_loss(out, keep):\n    pkg.on_device(out)\n    return ops.masked_mean(out, keep)\n",
        "train.py": "import torch_xla\nfrom pkg import layers\n\n\n"
                    "def train(model, loader, opt):\n"
                    "    for x, keep in loader:\n"
                    "        out = model(x)\n"
                    "        loss = layers.masked_loss(out, keep)\n"
                    "        loss.backward()\n"
                    "        opt.step()\n"
                    "        if loss > 10:\n"
                    "            print('diverging')\n"
                    "        torch_xla.sync()\n",
    })
    files = _files(root)
    index = ProjectIndex(str(root), files)
    decls = {p: store.declarations(p, index, Inputs(_settings()), None) for p in files}
    levels = {Path(p).relative_to(root).as_posix(): lv for p, lv in dependency_levels(index, decls).items()}
    assert levels["pkg/ops.py"] < levels["pkg/__init__.py"] < levels["pkg/layers.py"] < levels["train.py"]
    # layers.py never goes round again for ops's return (in a cycle walked at one level it read the
    # declarations' "not known"); what the broken dependency reads and the parameters the callers seed
    # (walked after their callees) still send modules round
    from xlalint.semantics import project

    stale = []

    def agrees(self, module, reads):
        view = project.FactsView(self, module)
        stale.extend((module, k) for k, v in reads.items() if k != "seeds|" and view.answer(k) != v)
        return not any(m == module for m, _ in stale)

    monkeypatch.setattr(project.Facts, "agrees", agrees)
    assert _lint(root) == {("train.py", 11, "XLA002")}
    assert stale and ("pkg.layers", "ret|pkg.ops:masked_mean") not in stale, stale


@pytest.mark.parametrize("seed", range(40))
def test_the_order_inside_a_cycle_keeps_every_dependency_it_does_not_break(seed):
    # random dependency graphs: every module gets a sub-level, a module is above every module it depends
    # on that comes before it, and the same graph gives the same levels whatever order it is given in
    import random

    from xlalint.semantics.project.levels import _cycle_levels

    rnd = random.Random(seed)
    members = [f"m{i}.py" for i in range(rnd.randint(2, 30))]
    deps = {m: {w for w in members if w != m and rnd.random() < 0.15} for m in members}
    sub = _cycle_levels(sorted(members), deps)
    assert set(sub) == set(members)
    broken = sum(1 for m in members for w in deps[m] if sub[w] >= sub[m])
    kept = sum(1 for m in members for w in deps[m] if sub[w] < sub[m])
    assert kept >= broken  # a greedy order keeps at least half of the dependencies
    shuffled = {m: set(rnd.sample(sorted(ws), len(ws))) for m, ws in rnd.sample(sorted(deps.items()), len(deps))}
    assert _cycle_levels(sorted(members), shuffled) == sub


def test_a_simple_cycle_breaks_one_dependency():
    from xlalint.semantics.project.levels import _cycle_levels

    deps = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "b", "c"}}
    sub = _cycle_levels(["a", "b", "c", "d"], deps)
    assert sum(1 for m, ws in deps.items() for w in ws if sub[w] >= sub[m]) == 1
    assert sub["d"] > max(sub["a"], sub["b"], sub["c"])


def test_an_override_in_another_module_receives_what_the_base_class_passes(tmp_path):
    # the base trainer moves every entry of its host batch but `meta` to the device itself: the subclass's
    # hook reads `meta` on the host (silent) and a moved entry on the device (found)
    root = tmp_path / "proj"
    _project(root, {
        "trains/__init__.py": "",
        "trains/base.py": "import torch_xla\n\n\nclass BaseTrainer:\n"
                          "    def run_epoch(self, model, data_loader, opt, device):\n"
                          "        for it, batch in enumerate(data_loader):\n"
                          "            for k in batch:\n"
                          "                if k != 'meta':\n"
                          "                    batch[k] = batch[k].to(device=device)\n"
                          "            out = model(batch['input'])\n"
                          "            out.mean().backward()\n"
                          "            opt.step()\n"
                          "            self.debug(batch, out)\n"
                          "            torch_xla.sync()\n\n"
                          "    def debug(self, batch, output):\n"
                          "        raise NotImplementedError\n",
        "trains/det.py": "from .base import BaseTrainer\n\n\nclass DetTrainer(BaseTrainer):\n"
                         "    def debug(self, batch, output):\n"
                         "        ids = batch['meta']['img_id'].numpy()\n"
                         "        return output.max().item(), ids\n",
    })
    assert _lint(root) == {("trains/det.py", 7, "XLA001")}


SHAPES = {
    "local_classes": """
        import enum
        import torch
        from torch import nn


        def remove_dropout(model):
            class DropoutRemover(torch.fx.Transformer):
                def call_module(self, target, args, kwargs):
                    class Inner(nn.Module):
                        pass
                    return Inner()
            return DropoutRemover(model).transform()


        class GraphModule(nn.Module):
            def __new__(cls, *args):
                class GraphModuleImpl(cls):
                    pass
                return super().__new__(GraphModuleImpl)

            if torch.__version__ > "2":
                def step(self, x):
                    return x.item()
            else:
                def step(self, x):
                    return x

            try:
                class Config(enum.Enum):
                    A = 1
            except ImportError:
                pass
        """,
    "defs_under_statements": """
        import operator

        for method in ("add", "mul"):
            def _scope(method):
                def impl(*args):
                    return getattr(operator, method)(*args)
                return impl

        with open(__file__) as f:
            class Reader:
                def read(self):
                    return f.read()

        while False:
            def never():
                class Never:
                    pass
        """,
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_declarations_name_what_the_walk_names(name):
    # a module whose walked summary names functions or classes its declarations did not makes the facts
    # resolve every name of the project again (Facts.update: on torch, each such module cost a rebuild of
    # the call-site index, 6 s of a one-file run after an edit): the declarations name classes defined in
    # functions and definitions under module-level `for`/`with` and class-level `if`/`try` as the walk does
    import textwrap

    from xlalint.semantics.project.facts import _shape

    text = textwrap.dedent(SHAPES[name]).lstrip("\n")
    data = text.encode()
    declared = declare(data, "m.py", "pkg.m", False)
    walked = analyse_module(data, "m.py", module="pkg.m", is_package=False, checked=True)
    assert _shape(declared["summary"]) == _shape(walked["summary"])


def test_the_declarations_find_every_call_cpython_sees():
    """``_ast_calls`` is ``ast.walk`` without its generators: on real code of every shape (the
    standard library's own modules: comprehensions, f-strings, decorators, `global`, `match`, dicts
    with `**`), it finds exactly the calls ``ast.walk`` finds."""
    import ast
    import inspect
    import json.decoder
    import string
    import typing

    from xlalint.semantics.project.declarations import _ast_calls

    sources = [inspect.getsource(m) for m in (ast, json.decoder, string, typing)]
    sources.append("global g\nmatch p:\n    case Point(x=f(1)): pass\nd = {**h(2), 'k': [i(j) for j in k()]}\n"
                   "@deco(3)\ndef fn(a=dflt()):\n    text = f'{fmt(a)!r:>{width()}}'\n")
    for src in sources:
        tree = ast.parse(src)
        want = sorted((n.lineno, n.col_offset) for n in ast.walk(tree) if isinstance(n, ast.Call))
        got = sorted((n.lineno, n.col_offset) for n in _ast_calls(tree))
        assert want and got == want


def test_freed_trees_are_given_back_after_a_big_file_and_every_megabyte(monkeypatch):
    # malloc_trim after every small file was 1.6% of a run on torch; after a big one it keeps the peak down
    calls = []
    monkeypatch.setitem(memory._TRIM, "fn", lambda pad: calls.append(pad))
    monkeypatch.setitem(memory._TRIM, "walked", 0)
    small = memory.TRIM_EVERY // 8  # under the big-file size
    for _ in range(7):
        memory.release_memory(small)  # seven eighths of a megabyte of small files
    assert calls == []
    memory.release_memory(small)  # the megabyte is reached
    assert len(calls) == 1
    memory.release_memory(10_000)
    assert len(calls) == 1
    memory.release_memory(memory.TRIM_EVERY // 4)  # a big file: at once
    assert len(calls) == 2


@pytest.mark.parametrize("annotated", [True, False])
def test_new_callers_that_leave_the_seeds_alone_send_nobody_round_again(tmp_path, monkeypatch, annotated):
    # helpers.py is walked before train.py, which then passes the loss as `weight`: annotated as a float,
    # the parameter takes no seed from it, the helper's walk would come out the same and is not done
    # again; unannotated, the loss seeds it (a tensor return), and both modules go round again
    weight = "weight: float" if annotated else "weight"
    root = tmp_path / "proj"
    _project(root, {
        "helpers.py": f"import torch\n\n\ndef scaled(values, {weight}):\n    return torch.tensor(values) * weight\n",
        "train.py": "import torch_xla\nfrom helpers import scaled\n\n\n"
                    "def train(model, loader):\n"
                    "    sizes = [1, 2]\n"
                    "    for x, y in loader:\n"
                    "        out = scaled(sizes, model(x))\n"
                    "        if out.sum() > 0:\n"
                    "            print('positive')\n"
                    "        torch_xla.sync()\n",
    })
    walks = []
    real = pool.analyse_one

    def counted(path, *args):
        walks.append(Path(path).name)
        return real(path, *args)

    monkeypatch.setattr(pool, "analyse_one", counted)
    # a float times a host tensor is a host tensor: reading it costs nothing; a device loss makes it a device one
    assert _lint(root) == (set() if annotated else {("train.py", 9, "XLA002")})
    assert sorted(walks) == (["helpers.py", "train.py"] if annotated else ["helpers.py"] * 2 + ["train.py"] * 2)


PLAIN_TRAIN = (
    "import torch\n"
    "import torch_xla\n"
    "from tagger.losses import masked_mean\n"
    "\n"
    "\n"
    "def main(model, loader, opt):\n"
    "    device = torch_xla.device()\n"
    "    for x, y in loader:\n"
    "        x, y = x.to(device), y.to(device)\n"
    "        loss = torch.nn.functional.cross_entropy(model(x), y, reduction='none')\n"
    "        loss = masked_mean(loss)\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        torch_xla.sync()\n"
)
PLAIN_HELPER = "def masked_mean(loss):\n    return loss[loss > 0].mean()\n"


def test_a_plain_folder_named_is_one_project(tmp_path, monkeypatch, capsys):
    """Issue 33 item 1: an unpacked archive (no pyproject.toml, setup.py/cfg or .git at or above it) named
    on the command line is one project: train.py's call reaches tagger/losses.py."""
    from xlalint.cli import main
    from xlalint.semantics.project import marked_root

    if marked_root(str(tmp_path)) is not None:
        pytest.skip(f"a root marker above the temporary directory: {marked_root(str(tmp_path))}")
    drop = tmp_path / "code_drop"
    (drop / "tagger").mkdir(parents=True)
    (drop / "train.py").write_text(PLAIN_TRAIN)
    (drop / "tagger" / "losses.py").write_text(PLAIN_HELPER)
    expected = {("tagger/losses.py", 2, "XLA003")}

    def found(findings, base):
        return {(Path(f.path).resolve().relative_to(base.resolve()).as_posix(), f.line, f.code) for f in findings}

    assert found(lint_files([str(drop / "train.py"), str(drop / "tagger" / "losses.py")], build_settings(None),
                            jobs=1, folders=[str(drop)]), drop) == expected
    # without the named folder each directory is its own project and the helper's finding vanishes
    assert found(lint_files([str(drop / "train.py"), str(drop / "tagger" / "losses.py")], build_settings(None),
                            jobs=1), drop) == set()
    # as a user runs it: the folder by name, and `xlalint` with no path inside it
    monkeypatch.chdir(tmp_path)
    assert main(["--isolated", "--no-cache", "--output-format", "concise", "code_drop"]) == 1
    assert "code_drop/tagger/losses.py:2:" in capsys.readouterr().out
    monkeypatch.chdir(drop)
    assert main(["--isolated", "--no-cache", "--output-format", "concise"]) == 1
    assert "tagger/losses.py:2:" in capsys.readouterr().out
    # files named alone, in the folder that holds them: the current directory is their project's root
    for named in (["tagger/losses.py"], ["tagger/losses.py", "train.py"]):
        assert main(["--isolated", "--no-cache", "--output-format", "concise", *named]) == 1, named
        assert "tagger/losses.py:2:" in capsys.readouterr().out
    # ... but not a folder above the current directory: from tagger/, the file's own directory
    monkeypatch.chdir(drop / "tagger")
    assert main(["--isolated", "--no-cache", "--output-format", "concise", "losses.py"]) == 0
    capsys.readouterr()


def test_a_plain_folder_is_one_project_for_flake8_and_the_server_too(tmp_path, monkeypatch):
    """Issue 33 item 1, the front ends that lint one file at a time: flake8 run inside a plain folder (its
    current directory), and the language server with the folder as its workspace, connect train.py to
    tagger/losses.py; the filesystem's root and the home directory are never taken for a project."""
    from xlalint.run.files import root_for
    from xlalint.semantics.project import marked_root
    from xlalint.server import lint_document

    if marked_root(str(tmp_path)) is not None:
        pytest.skip(f"a root marker above the temporary directory: {marked_root(str(tmp_path))}")
    drop = tmp_path / "code_drop"
    (drop / "tagger").mkdir(parents=True)
    (drop / "train.py").write_text(PLAIN_TRAIN)
    helper = drop / "tagger" / "losses.py"
    helper.write_text(PLAIN_HELPER)
    assert root_for(str(helper), [str(drop)]) == str(drop)
    assert root_for(str(helper), []) == str(drop / "tagger")
    assert root_for(str(helper), [os.sep, os.path.expanduser("~")]) == str(drop / "tagger")
    settings = build_settings(None)
    assert [(f.line, f.code) for f in lint_document(str(helper), PLAIN_HELPER, settings, [str(drop)])] == [(2, "XLA003")]
    assert lint_document(str(helper), PLAIN_HELPER, settings, []) == []
    from xlalint_flake8 import _lint

    monkeypatch.chdir(drop)
    assert [(f.line, f.code) for f in _lint(str(helper), PLAIN_HELPER, None, settings)] == [(2, "XLA003")]
