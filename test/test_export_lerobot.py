"""`clawgym export lerobot` (issue 20): a dataset artifact as a LeRobotDataset v3.0 folder.

Round trips against the MCAP rows (states, actions, camera frames, timestamps, episode index,
task strings):

- always: the exported parquet and JSON files read back with pyarrow (the documented layout);
- with LeRobot's own loader (``LeRobotDataset``): in this interpreter when ``lerobot`` imports,
  else through ``$CLAWGYM_LEROBOT_PYTHON``, a Python with lerobot 0.4.4 installed (lerobot
  cannot share this project's venv: it requires torch<2.11, packaging<26 and rerun-sdk<0.27,
  the project pins torch 2.13.0, packaging 26.4 and rerun-sdk 0.41.0). Skipped with that
  reason when neither is there.

Bad input: an image export of a dataset without frames, an unknown dataset id, an existing
OUT and an episode that fails mid-export: one line, exit 2, nothing left behind.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.dataset.reader import open_dataset

ROOT = Path(__file__).resolve().parents[1]
EPISODES = 3
STEPS = 12

LEROBOT_PYTHON = os.environ.get("CLAWGYM_LEROBOT_PYTHON", "")
try:
    import lerobot  # noqa: F401
    HAVE_LEROBOT = True
except ImportError:
    HAVE_LEROBOT = False
NO_LEROBOT = ("lerobot is not installed here: lerobot 0.4.4 requires torch<2.11, packaging<26 "
              "and rerun-sdk<0.27, which conflict with this project's pins (torch 2.13.0, "
              "packaging 26.4, rerun-sdk 0.41.0); set CLAWGYM_LEROBOT_PYTHON to a Python with "
              "lerobot==0.4.4 to run this test")


def make_dataset(run: Path, images: bool) -> str:
    from clawgym_ros.dataset.writer import synthesize_dataset
    from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes
    from clawgym_ros.synthesis.synthetic import SIGNOFF, synthetic_episode

    mixture = MixtureSpec.from_entries([{"task": "pick_place", "family": "none", "weight": 1}])
    options = {"steps": STEPS, **({"images": True} if images else {})}
    specs = plan_episodes(mixture, EPISODES, 7, options=options)
    art, _ = synthesize_dataset(ArtifactStore(run), specs, synthetic_episode, SIGNOFF,
                                workers=1, generation={"seed": 7, "episodes": EPISODES,
                                                       "options": options},
                                seeds={"run": 7})
    return art.id


def clawgym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A 3-episode dataset with wrist-camera frames, exported by the CLI."""
    run = tmp_path_factory.mktemp("run")
    dataset_id = make_dataset(run, images=True)
    out = run / "lerobot"
    result = clawgym("export", "lerobot", dataset_id[:12], str(out), "--images",
                     "--run-dir", str(run))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == str(out)
    summary = json.loads(result.stdout.splitlines()[1])
    assert summary["episodes"] == EPISODES and summary["frames"] == EPISODES * STEPS
    return run, dataset_id, out


def mcap_rows(run: Path, dataset_id: str) -> list[dict]:
    """Per episode, what the export must hold, from the MCAP files."""
    dataset = open_dataset(ArtifactStore(run), dataset_id)
    obs_keys = [k for k, _ in dataset.info["observation_spec"]]
    act_keys = [k for k, _ in dataset.info["action_spec"]]
    out = []
    for ep in range(len(dataset)):
        rec = dataset.episode(ep)
        out.append({
            "state": np.concatenate([rec.observations[k] for k in obs_keys], axis=1),
            "action": np.concatenate([rec.actions[k] for k in act_keys], axis=1),
            "image": rec.images["wrist_camera"], "time": rec.time - rec.time[0],
            "task": f"{rec.task}/{rec.template}", "seed": rec.seed})
    return out


def test_the_export_reads_back_as_the_mcap_rows(exported):
    import pyarrow.parquet as pq
    from PIL import Image

    run, dataset_id, out = exported
    rows = mcap_rows(run, dataset_id)
    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 20
    assert info["total_episodes"] == EPISODES and info["total_frames"] == EPISODES * STEPS
    assert info["features"]["observation.images.wrist_camera"] == {
        "dtype": "image", "shape": [24, 32, 3], "names": ["height", "width", "channels"]}
    state_names = info["features"]["observation.state"]["names"]
    assert state_names[:2] == ["joint_pos_0", "joint_pos_1"] and "gripper_width" in state_names
    tasks = pq.read_table(out / "meta/tasks.parquet").to_pydict()
    task_of = dict(zip(tasks["task_index"], tasks["__index_level_0__"]))
    data = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pydict()
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["episode_index"] for e in episodes] == list(range(EPISODES))
    index = 0
    for ep, (row, meta) in enumerate(zip(rows, episodes)):
        assert meta["tasks"] == [row["task"]] and meta["length"] == STEPS
        assert (meta["dataset_from_index"], meta["dataset_to_index"]) == (index, index + STEPS)
        assert meta["clawgym/dataset_id"] == dataset_id and meta["clawgym/seed"] == row["seed"]
        frames = slice(index, index + STEPS)
        np.testing.assert_array_equal(np.array(data["observation.state"][frames]),
                                      row["state"].astype(np.float32))
        np.testing.assert_array_equal(np.array(data["action"][frames]),
                                      row["action"].astype(np.float32))
        np.testing.assert_allclose(data["timestamp"][frames], row["time"], atol=1e-6)
        assert data["episode_index"][frames] == [ep] * STEPS
        assert data["frame_index"][frames] == list(range(STEPS))
        assert data["index"][frames] == list(range(index, index + STEPS))
        assert {task_of[t] for t in data["task_index"][frames]} == {row["task"]}
        for k, cell in enumerate(data["observation.images.wrist_camera"][frames]):
            image = np.asarray(Image.open(io.BytesIO(cell["bytes"])))
            np.testing.assert_array_equal(image, row["image"][k])
        index += STEPS
    stats = json.loads((out / "meta/stats.json").read_text())
    all_state = np.concatenate([r["state"] for r in rows]).astype(np.float32)
    np.testing.assert_allclose(stats["observation.state"]["mean"], all_state.mean(axis=0),
                               rtol=1e-6, atol=1e-7)
    assert stats["observation.images.wrist_camera"]["count"] == [EPISODES * STEPS]
    assert np.array(stats["observation.images.wrist_camera"]["mean"]).shape == (3, 1, 1)


LOAD_SCRIPT = r"""
import json, sys
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
ds = LeRobotDataset("clawgym/export-test", root=sys.argv[1])
out = {"fps": ds.fps, "num_episodes": ds.num_episodes, "num_frames": ds.num_frames,
       "frames": []}
for i in range(len(ds)):
    item = ds[i]
    out["frames"].append({
        "state": item["observation.state"].tolist(), "action": item["action"].tolist(),
        "image": (item["observation.images.wrist_camera"].numpy() * 255).round()
                 .astype(np.uint8).transpose(1, 2, 0).tolist(),
        "episode_index": int(item["episode_index"]), "frame_index": int(item["frame_index"]),
        "index": int(item["index"]), "timestamp": float(item["timestamp"]),
        "task": item["task"]})
json.dump(out, open(sys.argv[2], "w"))
"""


@pytest.mark.skipif(not (HAVE_LEROBOT or LEROBOT_PYTHON), reason=NO_LEROBOT)
@pytest.mark.timeout(300)
def test_lerobot_loads_the_export_as_the_mcap_rows(exported, tmp_path):
    run, dataset_id, out = exported
    python = sys.executable if HAVE_LEROBOT else LEROBOT_PYTHON
    script = tmp_path / "load.py"
    script.write_text(LOAD_SCRIPT)
    result = subprocess.run(
        [python, str(script), str(out), str(tmp_path / "loaded.json")], capture_output=True,
        text=True, timeout=240, cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
             "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads((tmp_path / "loaded.json").read_text())
    assert (loaded["fps"], loaded["num_episodes"], loaded["num_frames"]) == \
        (20, EPISODES, EPISODES * STEPS)
    rows = mcap_rows(run, dataset_id)
    for frame in loaded["frames"]:
        row, k = rows[frame["episode_index"]], frame["frame_index"]
        assert frame["index"] == frame["episode_index"] * STEPS + k
        np.testing.assert_array_equal(np.float32(frame["state"]), row["state"][k].astype(
            np.float32))
        np.testing.assert_array_equal(np.float32(frame["action"]), row["action"][k].astype(
            np.float32))
        np.testing.assert_array_equal(np.uint8(frame["image"]), row["image"][k])
        assert frame["timestamp"] == pytest.approx(row["time"][k], abs=1e-6)
        assert frame["task"] == row["task"]


def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path):
    run = tmp_path / "run"
    plain = make_dataset(run, images=False)
    out = tmp_path / "out"

    def refused(*args: str, needle: str) -> None:
        result = clawgym("export", "lerobot", *args, "--run-dir", str(run))
        assert result.returncode == 2, result.stderr
        assert needle in result.stderr and result.stderr.count("\n") == 1, result.stderr
        assert result.stdout == ""

    refused(plain, str(out), "--images", needle="--images=True is invalid; allowed: a dataset "
            f"with camera frames; dataset {plain[:12]} has none")
    refused("0123456789abcdef", str(out), needle="0123456789abcdef")
    assert not out.exists()
    out.mkdir()
    refused(plain, str(out), needle="a path that does not exist yet")
    out.rmdir()
    # an episode file that breaks mid-export: nothing half-written stays
    dataset = open_dataset(ArtifactStore(run), plain)
    broken = dataset.episode_path(EPISODES - 1)
    broken.chmod(0o644)
    broken.write_bytes(broken.read_bytes()[:200])
    result = clawgym("export", "lerobot", plain, str(out), "--run-dir", str(run))
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert not out.exists() and not list(tmp_path.glob(".out.partial-*"))
    # without images the same dataset (intact) exports states and actions only
    other = tmp_path / "run2"
    ok = make_dataset(other, images=False)
    result = clawgym("export", "lerobot", ok, str(tmp_path / "plain"), "--run-dir", str(other))
    assert result.returncode == 0, result.stderr
    info = json.loads((tmp_path / "plain/meta/info.json").read_text())
    assert not [k for k in info["features"] if k.startswith("observation.images.")]
