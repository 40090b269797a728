"""``--format sarif`` and ``--format github`` are views of the same findings as ``--format json``: the
real CLI's output is validated against the official SARIF 2.1.0 schema (tests/data) and parsed back."""

from __future__ import annotations

import glob
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlparse

import jsonschema

from xlalint.findings import Finding
from xlalint.report import github

ROOT = Path(__file__).resolve().parent.parent
XLALINT = str(Path(sys.executable).parent / "xlalint")
SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
FIXTURES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(str(ROOT / "tests" / "fixtures" / "*.py")))

SLOW = textwrap.dedent("""\
    import torch
    import torch_xla

    model = torch.nn.Linear(4, 2).to(torch_xla.device())
    for step in range(3):
        loss = model(torch.randn(8, 4)).sum()
        loss.backward()
        a = loss.item()
        b = loss.item()
        a = loss.item()
        torch_xla.sync()
""")


def xlalint(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    proc = subprocess.run([XLALINT, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return proc


def as_json(*args, cwd=ROOT) -> list:
    return json.loads(xlalint("--format", "json", *args, cwd=cwd).stdout)


def sarif(*args, cwd=ROOT) -> dict:
    doc = json.loads(xlalint("--format", "sarif", *args, cwd=cwd).stdout)
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    return doc


def test_sarif_of_the_fixtures_is_valid_and_holds_every_finding():
    doc = sarif(*FIXTURES)
    assert doc["version"] == "2.1.0"
    assert len(doc["runs"]) == 1
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    listed = [line.split()[0] for line in xlalint("--list-rules").stdout.splitlines()]
    assert [r["id"] for r in rules] == listed
    for r in rules:
        assert r["name"] and r["shortDescription"]["text"] and r["fullDescription"]["text"]
        assert r["help"]["text"].startswith(f"{r['id']} ({r['name']})")
        assert r["helpUri"].startswith("https://")
        assert r["defaultConfiguration"]["level"] in ("error", "warning", "note")

    root = Path(unquote(urlparse(run["originalUriBaseIds"]["%SRCROOT%"]["uri"]).path))
    assert root == ROOT
    expected = as_json(*FIXTURES)
    assert expected, "the fixtures should hold findings"
    got = []
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        art, region = loc["artifactLocation"], loc["region"]
        assert art["uriBaseId"] == "%SRCROOT%" and not art["uri"].startswith(("/", "file:"))
        assert (root / unquote(art["uri"])).is_file()
        assert res["partialFingerprints"]
        got.append({
            "code": res["ruleId"], "message": res["message"]["text"], "filename": unquote(art["uri"]),
            "line": region["startLine"], "column": region["startColumn"],
            "end_line": region["endLine"], "end_column": region["endColumn"],
            "level": res["level"],
        })
    want = [{"code": f["code"], "message": f["message"], "filename": os.path.normpath(f["filename"]),
             "line": f["line"], "column": f["column"], "end_line": f["end_line"],
             "end_column": f["end_column"], "level": f["severity"]} for f in expected]
    assert got == want


def test_sarif_without_findings_is_valid(tmp_path):
    (tmp_path / "ok.py").write_text("import torch\nx = torch.ones(3)\nprint(x.sum().item())\n")
    doc = sarif("--isolated", "ok.py", cwd=tmp_path)
    assert doc["runs"][0]["results"] == []
    assert doc["runs"][0]["tool"]["driver"]["rules"]


def test_sarif_of_a_syntax_error_is_an_error_level_result(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nfor x in loader\n    pass\n")
    [res] = sarif("--isolated", "broken.py", cwd=tmp_path)["runs"][0]["results"]
    assert (res["ruleId"], res["level"]) == ("XLA900", "error")


def _fingerprints(doc) -> list:
    return [(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["partialFingerprints"])
            for r in doc["runs"][0]["results"]]


def test_fingerprints_follow_a_finding_not_its_line_number(tmp_path):
    train = tmp_path / "train.py"
    train.write_text(SLOW)
    before = _fingerprints(sarif("--isolated", "train.py", cwd=tmp_path))
    assert [line for line, _ in before] == [8, 9, 10]
    # identical lines (8 and 10) are told apart by their occurrence index
    assert len({json.dumps(fp, sort_keys=True) for _, fp in before}) == 3

    train.write_text("# a comment\n\n\n" + SLOW)  # the code moves down three lines
    after = _fingerprints(sarif("--isolated", "train.py", cwd=tmp_path))
    assert [line for line, _ in after] == [11, 12, 13]
    assert [fp for _, fp in after] == [fp for _, fp in before]

    train.write_text(SLOW.replace("b = loss.item()", "c = loss.item()"))  # the line itself changed
    changed = _fingerprints(sarif("--isolated", "train.py", cwd=tmp_path))
    assert changed[0][1] == before[0][1] and changed[2][1] == before[2][1]
    assert changed[1][1] != before[1][1]


# ------------------------------------------------------------------------------ github annotations
ANNOTATION = re.compile(r"^::(?P<cmd>error|warning|notice) (?P<props>[^:]*)::(?P<msg>.*)$")


def _unescape(s: str) -> str:
    return s.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def test_github_annotations_of_the_fixtures_match_the_json():
    proc = xlalint("--format", "github", *FIXTURES)
    expected = as_json(*FIXTURES)
    lines = proc.stdout.splitlines()
    assert expected and len(lines) == len(expected)
    for line, f in zip(lines, expected):
        m = ANNOTATION.match(line)
        assert m, line
        props = dict(p.split("=", 1) for p in m["props"].split(","))
        assert m["cmd"] == ("error" if f["severity"] == "error" else "warning")
        assert {k: _unescape(v) for k, v in props.items()} == {
            "file": f["filename"], "line": str(f["line"]), "col": str(f["column"]),
            "endLine": str(f["end_line"]), "endColumn": str(f["end_column"]),
            "title": f"{f['code']} {f['name']}",
        }
        assert _unescape(m["msg"]) == f["message"]


def test_github_escapes_what_the_runner_requires():
    f = Finding("dir,x/a:b.py", 3, 5, "XLA001", 3, 9, "host-read", "100% of steps\r\nread: a, b", "warning")
    e = Finding("b.py", 1, 1, "XLA900", 1, 2, "syntax-error", "syntax error: bad", "error")
    out = io.StringIO()
    github.render([f, e], out)
    assert out.getvalue().splitlines() == [
        "::warning file=dir%2Cx/a%3Ab.py,line=3,col=5,endLine=3,endColumn=9,title=XLA001 host-read"
        "::100%25 of steps%0D%0Aread: a, b",
        "::error file=b.py,line=1,col=1,endLine=1,endColumn=2,title=XLA900 syntax-error::syntax error: bad",
    ]


def test_github_annotation_for_a_syntax_error_is_an_error(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nfor x in loader\n    pass\n")
    out = xlalint("--isolated", "--format", "github", "broken.py", cwd=tmp_path).stdout
    assert out.startswith("::error file=broken.py,line=")
    assert "title=XLA900 syntax-error::" in out
