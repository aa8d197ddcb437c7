"""Artifact store: content ids, atomic commits, id validation, verification, lineage."""

from __future__ import annotations

import json

import pytest

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore, atomic_write_json
from clawgym_ros.artifacts.store import format_lineage
from clawgym_ros.errors import ArtifactError


@pytest.fixture
def store(tmp_path):
    return ArtifactStore(tmp_path / "run")


def test_same_content_same_id_and_manifest_records_provenance(store):
    a = store.put_files(C.KIND_DATASET, {"a.txt": b"hello", "sub/b.bin": b"\x00\x01"},
                        config={"task": "pick_place"}, seeds={"run": 7})
    b = store.put_files(C.KIND_DATASET, {"sub/b.bin": b"\x00\x01", "a.txt": b"hello"},
                        seeds={"run": 8})
    assert a.id == b.id and len(a.id) == 64
    assert a.path == store.root / C.KIND_DATASET / a.id
    m = json.loads((a.path / C.FILE_MANIFEST).read_text())
    assert m["kind"] == C.KIND_DATASET and m["seeds"] == {"run": 7}
    assert m["config"] == {"task": "pick_place"}
    assert "numpy" in m["versions"] and m["git_commit"]
    assert set(m["files"]) == {"a.txt", "sub/b.bin"}
    other_kind = store.put_files(C.KIND_REPORT, {"a.txt": b"hello", "sub/b.bin": b"\x00\x01"})
    assert other_kind.id != a.id


def test_failed_write_leaves_nothing_under_an_id(store):
    with pytest.raises(RuntimeError), store.stage(C.KIND_CHECKPOINT) as staging:
        (staging.path / "weights.bin").write_bytes(b"partial")
        raise RuntimeError("node died mid-write")
    assert not (store.root / C.KIND_CHECKPOINT).exists() or not any(
        (store.root / C.KIND_CHECKPOINT).iterdir())
    assert not any((store.root / C.DIR_STAGING).iterdir())
    assert store.list() == []


def test_uncommitted_staging_is_discarded(store):
    with store.stage(C.KIND_REPORT) as staging:
        (staging.path / "report.json").write_text("{}")
    assert store.list() == []


@pytest.mark.parametrize("bad", ["not-an-id", "../../etc/passwd", "ABCDEF0123", "abc",
                                 "0" * 65, "", None, 12345678, "deadbeef/../x"])
def test_malformed_ids_are_rejected(store, bad):
    with pytest.raises(ArtifactError, match="malformed"):
        store.resolve(bad)


def test_unknown_ambiguous_and_wrong_kind(store):
    a = store.put_files(C.KIND_DATASET, {"x": b"1"})
    with pytest.raises(ArtifactError, match="unknown"):
        store.resolve("0" * 64 if not a.id.startswith("0") else "1" * 64)
    assert store.resolve(a.id[:8]).id == a.id
    with pytest.raises(ArtifactError, match="is a dataset, expected a checkpoint"):
        store.resolve(a.id, kind=C.KIND_CHECKPOINT)
    # Two ids sharing an 8-character prefix (a collision a real store can meet over time).
    for tail in ("0" * 56, "1" * 56):
        (store.root / C.KIND_DATASET / ("cafebabe" + tail)).mkdir()
    common = "cafebabe"
    with pytest.raises(ArtifactError, match="ambiguous"):
        store.resolve(common)


def test_unknown_parent_is_refused(store):
    with pytest.raises(ArtifactError, match="unknown artifact id"):
        store.put_files(C.KIND_REPORT, {"r": b"1"}, parents=["a" * 64])
    assert store.list() == []


def test_symlink_escaping_the_run_dir_is_refused(store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.root / C.KIND_DATASET).mkdir(parents=True)
    (store.root / C.KIND_DATASET / ("ab" * 32)).symlink_to(outside)
    with pytest.raises(ArtifactError, match="outside"):
        store.resolve("ab" * 32)


def test_verify_detects_tampering(store):
    art = store.put_files(C.KIND_CHECKPOINT, {"w.bin": b"weights", "cfg.json": b"{}"})
    store.verify(art)
    (art.path / "w.bin").write_bytes(b"weightz")
    with pytest.raises(ArtifactError, match="'w.bin' is modified"):
        store.verify(art)
    (art.path / "w.bin").write_bytes(b"weights")
    (art.path / "extra").write_bytes(b"x")
    with pytest.raises(ArtifactError, match="'extra' is unexpected"):
        store.verify(art)


def test_lineage_reaches_configs_and_seeds(store):
    cfg = store.put_files(C.KIND_CONFIG, {"loop.yaml": b"iterations: 3"}, seeds={"run": 1})
    data = store.put_files(C.KIND_DATASET, {"ep.mcap": b"..."}, parents=[cfg.id],
                           seeds={"synth": 2}, config={"episodes": 10})
    ckpt = store.put_files(C.KIND_CHECKPOINT, {"w": b"w"}, parents=[data.id, cfg.id],
                           seeds={"train": 3})
    report = store.put_files(C.KIND_REPORT, {"r.json": b"{}"}, parents=[ckpt.id],
                             seeds={"suite": 4})
    tree = store.lineage(report.id[:12])
    assert tree["kind"] == C.KIND_REPORT
    (ckpt_node,) = tree["parents"]
    assert ckpt_node["seeds"] == {"train": 3}
    kinds = [p["kind"] for p in ckpt_node["parents"]]
    assert kinds == [C.KIND_DATASET, C.KIND_CONFIG]
    assert ckpt_node["parents"][0]["parents"][0]["seeds"] == {"run": 1}
    text = "\n".join(format_lineage(tree))
    for art in (cfg, data, ckpt, report):
        assert art.id in text


def test_atomic_write_json_replaces_whole_file(tmp_path):
    path = tmp_path / "loop" / "state.json"
    atomic_write_json(path, {"iteration": 1})
    atomic_write_json(path, {"iteration": 2})
    assert json.loads(path.read_text()) == {"iteration": 2}
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


STAGE_AND_HANG = """
import sys, time
from clawgym_ros.artifacts import ArtifactStore
with ArtifactStore(sys.argv[1]).stage("dataset") as staging:
    (staging.path / "episode.mcap").write_bytes(b"half")
    print(staging.path, flush=True)
    time.sleep(300)
"""


def test_staging_of_a_killed_writer_is_removed_at_store_open(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    run = tmp_path / "run"
    writer = subprocess.Popen([sys.executable, "-c", STAGE_AND_HANG, str(run)],
                              stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[1])
    try:
        staged = Path(writer.stdout.readline().strip())
        assert staged.is_dir()
        ArtifactStore(run)                      # the writer is alive: its folder stays
        assert staged.is_dir()
    finally:
        writer.kill()                           # kill -9: no cleanup of its own
        writer.wait()
    assert staged.is_dir()
    ArtifactStore(run)
    assert not staged.exists()


def test_stale_staging_cleanup_keeps_live_foreign_and_young_entries(store, tmp_path):
    import os

    from clawgym_ros.artifacts.store import _HOST, STALE_UNTAGGED_S, clean_stale_staging

    root = store.root / C.DIR_STAGING
    with store.stage(C.KIND_REPORT) as mine:
        (mine.path / "r.json").write_text("{}")
        other_host = root / f"dataset-w{'0' * 8 if _HOST != '0' * 8 else '1' * 8}-1-1-abc"
        reused_pid = root / f"dataset-w{_HOST}-{os.getpid()}-1-abc"   # our pid, other start
        young, old = root / "dataset-legacy1", root / "dataset-legacy2"
        for path in (other_host, reused_pid, young, old):
            path.mkdir()
        os.utime(old, (0, os.stat(old).st_mtime - STALE_UNTAGGED_S - 60))
        removed = clean_stale_staging(root)
        assert sorted(removed) == sorted([reused_pid, old])
        assert mine.path.is_dir() and other_host.is_dir() and young.is_dir()
        committed = mine.commit()
    assert committed.path.is_dir() and not mine.path.exists()
    os.chmod(root, 0o500)                       # a read-only run directory: left alone
    try:
        ArtifactStore(store.run_dir)
    finally:
        os.chmod(root, 0o700)


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_atomic_files_and_artifact_folders_get_the_umask_mode(tmp_path, mask):
    """As open()/mkdir() would create them (tempfile's 0600 / 0700 would leave a team's run
    directory unreadable to everyone but its writer)."""
    import os
    import stat

    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.artifacts.atomic import atomic_write_json

    old = os.umask(mask)
    try:
        path = atomic_write_json(tmp_path / "loop" / "state.json", {"a": 1})
        art = ArtifactStore(tmp_path / "run").put_files("config", {"x.json": b"{}"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE(art.path.stat().st_mode) == 0o777 & ~mask
    assert stat.S_IMODE(art.file("x.json").stat().st_mode) == 0o666 & ~mask
