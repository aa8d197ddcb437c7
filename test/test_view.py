"""`clawgym view` (issue 20): an episode of a dataset's MCAP or a report logged to Rerun, read
back from the .rrd with Rerun's own reader; the Foxglove layout names topics and fields that
the episode MCAP has."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import rerun.chunk as rerun_chunk  # pinned in requirements.txt: missing is a failure

from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.dataset.reader import Dataset
from test.conftest import tiny_suite_yaml

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "config" / "foxglove" / "episode_layout.json"


def clawgym(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    run = tmp_path_factory.mktemp("view") / "run"
    result = clawgym("synth", "--task", "pick_place", "--episodes", "1", "--seed", "0",
                     "--workers", "1", "--out", str(run), "--images")
    assert result.returncode == 0, result.stderr
    ident = result.stdout.split()[0]
    return run, Dataset(ArtifactStore(run).resolve(ident))


def read_rrd(path: Path) -> tuple[Counter, dict[str, object], set[str]]:
    """(rows per entity on the timelines, the entity chunks, static entities)."""
    rows: Counter = Counter()
    chunks: dict[str, list] = {}
    static = set()
    reader = rerun_chunk.RrdReader(path)
    assert [r.application_id for r in reader.recordings()] == ["clawgym"]
    for chunk in reader.stream():
        if chunk.is_static:
            static.add(chunk.entity_path)
            continue
        assert set(chunk.timeline_names) == {"step", "sim_time"}, chunk.timeline_names
        rows[chunk.entity_path] += chunk.num_rows
        chunks.setdefault(chunk.entity_path, []).append(chunk)
    return rows, chunks, static


def column(chunks: list, name: str) -> list:
    out = []
    for chunk in chunks:
        batch = chunk.to_record_batch()
        out += batch.column(batch.schema.names.index(name)).to_pylist()
    return out


def test_an_episode_reads_back_from_the_rrd(dataset, tmp_path):
    run, ds = dataset
    record = ds.episode(0)
    steps = len(record.time)
    out = tmp_path / "ep.rrd"
    result = clawgym("view", f"{ds.id[:12]}:0", "--run-dir", str(run), "--save", str(out))
    assert result.returncode == 0, result.stderr
    assert f"-> {out}" in result.stdout
    rows, chunks, static = read_rrd(out)
    expected = {f"/joints/{kind}/{name}": steps for kind in ("position", "velocity", "effort")
                for name in record.joint_names}
    n_objects = record.observations["object_poses"].shape[1] // 7
    expected |= {f"/objects/object_{i}": steps for i in range(n_objects)}
    expected |= {f"/actions/{key}/{i}": steps for key, v in record.actions.items()
                 for i in range(v.shape[1])}
    expected |= {"/tool": steps, "/physics/contact_force": steps, "/physics/collision": steps,
                 "/cameras/wrist_camera": steps, "/stages": len(record.stages),
                 "/skills": len(record.skill_calls), "/perturbation": 1}
    assert dict(rows) == expected
    assert n_objects >= 1 and len(record.stages) >= 3 and steps > 100
    assert {"/episode", "/objects/object_0"} <= static
    # values, not only counts: the joint series, the stage names, the object positions
    series = column(chunks["/joints/position/arm_joint_4"], "Scalars:scalars")
    j = record.joint_names.index("arm_joint_4")
    np.testing.assert_array_equal([v[0] for v in series], record.joint_position[:, j])
    assert [t[0] for t in column(chunks["/stages"], "TextLog:text")] == \
        [s.name for s in record.stages]
    translation = [c for c in chunks["/objects/object_0"][0].to_record_batch().schema.names
                   if "translation" in c.lower()]
    assert translation, chunks["/objects/object_0"][0].to_record_batch().schema.names
    xyz = np.array([v[0] for v in column(chunks["/objects/object_0"], translation[0])])
    np.testing.assert_allclose(xyz, record.observations["object_poses"][:, :3], atol=1e-6)
    frames = column(chunks["/cameras/wrist_camera"], "Image:buffer")
    assert bytes(np.asarray(frames[5][0], np.uint8)) == record.images["wrist_camera"][5].tobytes()


def test_without_a_viewer_it_saves_an_rrd_file(dataset, tmp_path):
    run, ds = dataset
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = clawgym("view", ds.id, "--run-dir", str(run.resolve()), "--viewer",
                     f"127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    saved = tmp_path / f"{ds.id[:12]}-ep0.rrd"
    assert saved.is_file() and f"rerun {saved.name}" in result.stdout
    assert read_rrd(saved)[0]["/stages"] >= 3


def test_a_report_reads_back_from_the_rrd(tmp_path):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(tiny_suite_yaml(2, "two nominal pick_place episodes (view test)"))
    run = tmp_path / "run"
    result = clawgym("eval", "--policy", "scripted:pick_place", "--suite", str(suite),
                     "--seed", "1", "--out", str(run), "--workers", "1", "--max-steps", "30")
    assert result.returncode == 0, result.stderr
    report_id = result.stdout.split()[0]
    report = json.loads(Path(result.stdout.splitlines()[1].split(": ", 1)[1]).read_text())
    out = tmp_path / "report.rrd"
    result = clawgym("view", report_id, "--run-dir", str(run), "--save", str(out))
    assert result.returncode == 0, result.stderr
    reader = rerun_chunk.RrdReader(out)
    rows: Counter = Counter()
    static = set()
    for chunk in reader.stream():
        if chunk.is_static:
            static.add(chunk.entity_path)
        else:
            assert chunk.timeline_names == ["episode"]
            rows[chunk.entity_path] += chunk.num_rows
    assert rows["/episodes/success"] == rows["/episodes/summary"] == 2
    assert rows["/episodes/metrics/comfort"] == 2
    frames = {f"/failure_frames/{f['key']}" for f in report["failure_frames"] if f.get("file")}
    assert frames and frames <= static      # 30 steps: the episodes fail, a frame is kept


def test_bad_targets_are_one_clear_line(dataset, tmp_path):
    run, ds = dataset
    for args, needle in [
        ((f"{ds.id}:7",), "episode index '7' of dataset"),
        ((f"{ds.id}:x",), "episode index 'x'"),
        ((ds.id, "--save", str(tmp_path / "x.txt")), "a file name ending in .rrd"),
        (("0" * 64,), "0000000000"),
        ((str(tmp_path / "missing.mcap"),), "missing.mcap: no such episode file"),
    ]:
        result = clawgym("view", *args, "--run-dir", str(run))
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], result.stderr


def test_the_foxglove_layout_names_topics_and_fields_of_the_episode_mcap(dataset):
    from mcap.reader import make_reader

    _, ds = dataset
    with open(ds.episode_path(0), "rb") as f:
        summary = make_reader(f).get_summary()
    channels = {c.topic: summary.schemas[c.schema_id] for c in summary.channels.values()}
    layout = json.loads(LAYOUT.read_text())
    paths = []
    for panel in layout["configById"].values():
        paths += [p["value"] for p in panel.get("paths", ())]
        if "topicPath" in panel:
            paths.append(panel["topicPath"])
        if "imageMode" in panel:
            paths.append('"' + panel["imageMode"]["imageTopic"] + '"')
    assert len(paths) >= 10
    for path in paths:
        match = re.fullmatch(r'"([^"]+)"(?:\.(\w+)(?:\[\d+\])?)?', path)
        assert match, path
        topic, field = match.groups()
        assert topic in channels, (path, sorted(channels))
        if field:
            definition = channels[topic].data.decode()
            first = definition.split("\n===")[0]
            assert re.search(rf"^\S+\s+{field}\b", first, re.M), (path, first)
    panels = re.findall(r'"(\w+![\w]+)"', json.dumps(layout["layout"]))
    assert sorted(panels) == sorted(layout["configById"])
