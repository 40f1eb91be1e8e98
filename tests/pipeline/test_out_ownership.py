"""`tileport port --out DIR` replaces and deletes only what an earlier port run wrote there: a folder
that holds no port run is refused (unless --force), and even forced, a file tileport did not write is
never replaced or deleted."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileport.cli import app

DATA = Path(__file__).parent / "data"
TARGET = [f"{DATA / 'rp_scale.py'}::scale_kernel", "--launches", str(DATA / "rp_launches.json")]
KEY = "scale_kernel"


def port(out: Path, *extra: str):
    return CliRunner().invoke(app, ["port", *TARGET, "--until", "A", "--no-gpu", "--out", str(out), *extra])


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `root`."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def plant(out: Path, names: list[str]) -> dict[str, str]:
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(f"the user's {name}\n".encode() + bytes(range(256)))
    return snapshot(out)


def refused(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)  # a diagnostic, no crash
    text = " ".join(result.output.split())
    for w in words:
        assert w in text, text


CLASHING = [f"{KEY}/A/verdict.json", f"{KEY}/notes.txt", "summary.json", "report.md", "report.html"]


@pytest.mark.parametrize("force", [False, True])
def test_files_tileport_did_not_write_are_never_replaced(tmp_path, force):
    out = tmp_path / "out"
    before = plant(out, CLASHING + ["precious.txt"])
    r = port(out, *(["--force"] if force else []))
    if force:  # forced, the names the run needs are still the user's: refused, naming them
        refused(r, "did not write", f"{KEY}", "summary.json", "report.md")
    else:
        refused(r, "holds no `tileport port` run", "--force")
    assert snapshot(out) == before  # byte-identical, and nothing added
    assert sorted(p.name for p in out.iterdir()) == sorted({n.split("/")[0] for n in CLASHING + ["precious.txt"]})


def test_forced_into_a_foreign_folder_leaves_its_files_alone(tmp_path):
    out = tmp_path / "out"
    before = plant(out, ["precious.txt", "data/table.bin", "parity.txt"])
    assert port(out).exit_code == 2
    r = port(out, "--force")
    assert r.exit_code == 0, r.output
    after = snapshot(out)
    assert {k: after.get(k) for k in before} == before
    assert (out / KEY / "A" / "verdict.json").is_file() and (out / "summary.json").is_file()
    r = port(out)  # now a folder holding a port run: reruns need no --force
    assert r.exit_code == 0, r.output
    assert {k: snapshot(out).get(k) for k in before} == before


def test_reruns_replace_their_own_files(tmp_path):
    out = tmp_path / "out"
    assert port(out).exit_code == 0
    (out / KEY / "A" / "analysis.json").write_text("stale")
    user = plant(out, ["notes.txt"])
    for extra in ([], ["--resume"]):
        r = port(out, *extra)
        assert r.exit_code == 0, r.output
    assert (out / KEY / "A" / "analysis.json").read_text() != "stale"  # the fresh run replaced its own file
    assert snapshot(out)["notes.txt"] == user["notes.txt"]
