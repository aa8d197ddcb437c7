"""The user docs name only files that exist: every relative Markdown link, every repository
path (``docs/``, ``clawgym_ros/``, ``config/``, ``test/``, ``launch/``) and every module path
in backticks (``training/bc.py``, resolved in the repository or in ``clawgym_ros/``) named in
README.md or a Markdown file under docs/ resolves. Fenced code blocks are skipped (their paths
are examples the reader creates, e.g. ``config/loop/my_loop.yaml``), and so are paths with a
placeholder (``<id>``, ``*``, ``{a,b}``) and modules of a package that is not here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
PATH = re.compile(
    r"(?<![\w/.-])((?:docs|clawgym_ros|config|test|launch)/[\w./*<>{},-]*[\w*>}])")
MODULE = re.compile(r"`((?:[A-Za-z_]+/)+[A-Za-z_]+\.py)[`:]")
PLACEHOLDER = set("<>*{}")


def _doc_files() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def dead_references(path: Path, root: Path = ROOT) -> list[str]:
    """The relative links and repository paths in ``path`` (a file under ``root``, the
    repository) that name no file or folder."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    dead = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):     # http:, mailto:, ...
            continue
        if not (path.parent / target).exists():
            dead.append(f"{path.relative_to(root)}: link {target}")
    for match in PATH.finditer(text):
        target = match.group(1).rstrip(".")
        if PLACEHOLDER & set(target):
            continue
        if not (root / target).exists():
            dead.append(f"{path.relative_to(root)}: path {target}")
    for match in MODULE.finditer(text):
        target = match.group(1)
        bases = [b for b in (root, root / "clawgym_ros")
                 if (b / target.split("/")[0]).is_dir()]      # else a reader's own package
        if bases and not any((b / target).exists() for b in bases):
            dead.append(f"{path.relative_to(root)}: module {target}")
    return dead


def test_docs_name_only_existing_files():
    files = _doc_files()
    assert len(files) > 10
    dead = [line for path in files for line in dead_references(path)]
    assert not dead, "dead references in the docs:\n" + "\n".join(dead)


def test_a_dead_reference_is_found(tmp_path):
    """The check fails on a missing file and passes over fenced examples and placeholders."""
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "notes" / "here.md").write_text("x\n", encoding="utf-8")
    doc = tmp_path / "docs" / "probe.md"
    doc.write_text("[ok](notes/here.md), [dead](notes/gone.md), docs/notes/here.md,\n"
                   "docs/results/none.md, test/test_tasks_*.py, docs/<date>-x.md,\n"
                   "`docs/gone.py`, `my_pkg/mod.py`.\n"
                   "```\nconfig/loop/example_only.yaml\n```\n", encoding="utf-8")
    assert dead_references(doc, tmp_path) == [
        "docs/probe.md: link notes/gone.md", "docs/probe.md: path docs/results/none.md",
        "docs/probe.md: path docs/gone.py", "docs/probe.md: module docs/gone.py"]
