"""Dataset layer: message definitions, MCAP episodes (third-party readers), artifacts, cache."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.dataset.cache import cache_key, training_table
from clawgym_ros.dataset.episode_mcap import (
    MESSAGE_TYPES,
    EpisodeFormatError,
    encode_episode,
    float64_multiarray_data,
    read_episode,
)
from clawgym_ros.dataset.msgdefs import SEPARATOR, field_types, message_definition
from clawgym_ros.dataset.reader import open_dataset
from clawgym_ros.dataset.table import TrainingTable, group_name
from clawgym_ros.dataset.writer import synthesize_dataset
from clawgym_ros.errors import ArtifactError, ClawgymError
from clawgym_ros.synthesis.episode import EpisodeSpec
from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes
from clawgym_ros.synthesis.synthetic import SIGNOFF, synthetic_episode

ARRAYS = ("time", "joint_position", "joint_velocity", "joint_effort", "contact_force",
          "collision", "energy")


def _record(images=True, **spec_fields):
    fields = {"index": 4, "seed": 99, "task": C.TASK_PICK_PLACE, "family": C.FAMILY_LIGHTING,
              "intensity": 0.4, "options": {"images": images, "steps": 36}}
    fields.update(spec_fields)
    return synthetic_episode(EpisodeSpec(**fields))


def _assert_same(a, b):
    for name in ARRAYS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for group in ("observations", "actions", "images"):
        x, y = getattr(a, group), getattr(b, group)
        assert list(x) == list(y), group
        for key in x:
            assert x[key].dtype == y[key].dtype and np.array_equal(x[key], y[key]), key
    for field in ("task", "template", "family", "intensity", "difficulty", "episode_index",
                  "seed", "perturbation_params", "perturbation_schedule", "joint_names",
                  "goal", "achieved", "outcome"):
        assert getattr(a, field) == getattr(b, field), field
    assert [(s.name, s.args, s.outcome, s.detail) for s in a.skill_calls] == \
        [(s.name, s.args, s.outcome, s.detail) for s in b.skill_calls]
    for x, y in zip(a.skill_calls, b.skill_calls):
        assert abs(x.start - y.start) < 1e-9 and abs(x.end - y.end) < 1e-9
    assert [s.name for s in a.stages] == [s.name for s in b.stages]
    assert np.allclose([s.time for s in a.stages], [s.time for s in b.stages], atol=1e-9)


def test_message_definitions_are_ros2_bag_style_and_parse_in_rosbags():
    text = message_definition("sensor_msgs/JointState")
    assert text.startswith("# This is a message") or "float64[] position" in text
    assert f"{SEPARATOR}\nMSG: std_msgs/Header\n" in text
    assert f"{SEPARATOR}\nMSG: builtin_interfaces/Time\n" in text
    assert text.count("MSG: builtin_interfaces/Time") == 1
    skill = message_definition("clawgym_interfaces/msg/SkillCall")
    assert "MSG: clawgym_interfaces/SkillArgument" in skill  # same-package short name
    assert field_types("Header h\nstring NAME=\"x#y\"\nint32[<=3] a\nFoo[] f\n", "p") == \
        ["std_msgs/Header", "p/Foo"]
    for type_name in MESSAGE_TYPES:
        types = get_types_from_msg(message_definition(type_name), type_name)
        assert type_name in types
    with pytest.raises(ClawgymError, match="not found"):
        message_definition("no_such_pkg/Thing")


def test_episode_round_trip_is_exact_and_bytes_are_reproducible():
    record = _record()
    data = encode_episode(record)
    assert encode_episode(_record()) == data  # same input -> byte-identical file
    _assert_same(record, read_episode(data))
    no_images = read_episode(data, images=False)
    assert no_images.images == {} and np.array_equal(no_images.time, record.time)
    assert encode_episode(record, images=False) != data
    with pytest.raises(EpisodeFormatError):
        read_episode(b"\x89MCAP0\r\n not an episode")


def _base_record(width: int, energy: bool) -> object:
    """A record with a base twist action (2 or 6 values), no arm target, optional energy,
    NaN and signed-zero values."""
    rng = np.random.default_rng(width)
    n = 7
    rec = _record(images=False)
    joints = ("left_wheel_joint", "right_wheel_joint")
    obs = {C.OBS_JOINT_POS: rng.normal(size=(n, 2)), C.OBS_IMU: rng.normal(size=(n, 10))}
    obs[C.OBS_IMU][2, 3] = np.nan
    act = {C.ACT_BASE_TWIST: rng.normal(size=(n, width))}
    act[C.ACT_BASE_TWIST][1, 0] = -0.0
    return dataclasses.replace(
        rec, time=np.arange(1, n + 1) * 0.0123456789, joint_names=joints,
        joint_position=rng.normal(size=(n, 2)), joint_velocity=rng.normal(size=(n, 2)),
        joint_effort=rng.normal(size=(n, 2)), observations=obs, actions=act,
        contact_force=rng.uniform(0, 5, n), collision=np.zeros(n, dtype=bool),
        energy=rng.normal(size=n) if energy else None, images={}, stages=[], skill_calls=[])


def test_fast_message_records_match_the_mcap_writer_across_chunks():
    """The writer's own message records (``_Ros2Writer._add_message``) give the bytes of
    mcap's ``Writer.add_message`` also when the frames fill several 4 MB chunks."""
    record = _record()
    n = record.num_steps
    frames = np.random.default_rng(3).integers(0, 256, (n, 240, 240, 3), dtype=np.uint8)
    record = dataclasses.replace(record, images={C.CAMERA_WRIST: frames})
    record.validate()
    fast = encode_episode(record)
    assert len(fast) > 5 * 1024 * 1024          # frames over more than one 4 MB chunk
    assert fast == encode_episode(record, fast=False)
    assert np.array_equal(read_episode(fast).images[C.CAMERA_WRIST], frames)


def test_fast_cdr_path_writes_the_same_bytes_as_the_generic_encoder():
    """The NumPy encoding of the fixed-layout messages (JointState, Float64MultiArray,
    one-point JointTrajectory with and without velocities, GripperCommand, Twist) gives
    byte-identical files to mcap-ros2-support's generic CDR encoder."""
    arm = _record()
    no_vel = dataclasses.replace(arm, actions={
        k: v for k, v in arm.actions.items() if k != C.ACT_JOINT_VEL})
    records = [arm, no_vel, _record(images=False), _base_record(2, True),
               _base_record(6, False)]
    for record in records:
        record.validate()
        fast = encode_episode(record)
        assert fast == encode_episode(record, fast=False)
        back = read_episode(fast)
        for key, value in record.observations.items():
            assert np.array_equal(back.observations[key], value, equal_nan=True), key
        assert np.array_equal(back.actions[C.ACT_JOINT_TARGET if C.ACT_JOINT_TARGET in
                                            record.actions else C.ACT_BASE_TWIST],
                              record.actions[C.ACT_JOINT_TARGET if C.ACT_JOINT_TARGET in
                                             record.actions else C.ACT_BASE_TWIST])
        assert np.array_equal(back.joint_position, record.joint_position)


def test_episode_file_is_read_by_rosbags(tmp_path):
    record = _record()
    path = tmp_path / "episode.mcap"
    path.write_bytes(encode_episode(record))
    with AnyReader([path]) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        assert topics[C.TOPIC_JOINT_STATES] == "sensor_msgs/msg/JointState"
        assert topics[f"{C.CAMERA_WRIST}/image_raw"] == "sensor_msgs/msg/Image"
        got = {t: [] for t in topics}
        for conn, stamp, raw in reader.messages():
            got[conn.topic].append((stamp, reader.deserialize(raw, conn.msgtype)))
    joints = got[C.TOPIC_JOINT_STATES]
    assert len(joints) == record.num_steps
    assert np.array_equal(np.stack([m.position for _, m in joints]), record.joint_position)
    assert list(joints[0][1].name) == list(record.joint_names)
    assert joints[3][0] == round(record.time[3] * 1e9)
    frames = [m for _, m in got[f"{C.CAMERA_WRIST}/image_raw"]]
    assert frames[5].encoding == "rgb8"
    assert np.array_equal(frames[5].data.reshape(frames[5].height, frames[5].width, 3),
                          record.images[C.CAMERA_WRIST][5])
    skills = [m for _, m in got[C.TOPIC_SKILL_CALLS]]
    assert [s.name for s in skills] == [c.name for c in record.skill_calls]
    assert json.loads(skills[0].arguments[0].value) == record.skill_calls[0].args["target"]
    (_, pert), = got[C.TOPIC_PERTURBATION_STATE]
    assert pert.family == C.FAMILY_LIGHTING and pert.intensity == 0.4
    assert {p.name: p.value for p in pert.parameters} == record.perturbation_params
    traj = [m for _, m in got[C.TOPIC_JOINT_TRAJECTORY]]
    assert np.array_equal(traj[7].points[0].positions, record.actions[C.ACT_JOINT_TARGET][7])
    grip = [m for _, m in got[C.TOPIC_GRIPPER_COMMAND]]
    assert grip[7].width == record.actions[C.ACT_GRIPPER][7, 0]
    # A typestore registered from the same definitions decodes as well.
    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(message_definition("sensor_msgs/JointState"),
                                      "sensor_msgs/msg/JointState"))
    msg = store.deserialize_cdr(_raw(path, C.TOPIC_JOINT_STATES), "sensor_msgs/msg/JointState")
    assert np.array_equal(msg.effort, record.joint_effort[0])


def _raw(path: Path, topic: str) -> bytes:
    with open(path, "rb") as stream:
        for _, _, message in make_reader(stream).iter_messages(topics=[topic]):
            return message.data
    raise AssertionError(topic)


def test_episode_file_is_read_by_the_mcap_ros2_decoder():
    record = _record(images=False)
    reader = make_reader(io.BytesIO(encode_episode(record)),
                         decoder_factories=[DecoderFactory()])
    header = reader.get_header()
    assert header.profile == "ros2"
    schemas = {s.name: s for s in reader.get_summary().schemas.values()}
    assert schemas["sensor_msgs/msg/JointState"].encoding == "ros2msg"
    vel = [m.velocity for _, _, _, m in
           reader.iter_decoded_messages(topics=[C.TOPIC_JOINT_STATES])]
    assert np.array_equal(np.array(vel), record.joint_velocity)
    meta = {m.name: m.metadata for m in reader.iter_metadata()}
    assert json.loads(meta[C.MCAP_METADATA_EPISODE]["meta"])["seed"] == 99


def _synthesize(store, workers, n=8, seed=3, images=False):
    mix = MixtureSpec.from_entries([
        {"task": C.TASK_PICK_PLACE, "weight": 3},
        {"task": C.TASK_PICK_PLACE, "family": C.FAMILY_SENSOR_NOISE, "intensity": 0.5}])
    specs = plan_episodes(mix, n, seed, options={"steps": 24, "images": images})
    specs = [dataclasses.replace(s, options={**s.options, "fault": "collision"})
             if s.index == 1 else s for s in specs]
    return synthesize_dataset(store, specs, synthetic_episode, SIGNOFF, workers=workers,
                              generation={"seed": seed, "episodes": n,
                                          "mixture": mix.to_dict()},
                              config={"workers": workers}, seeds={"run": seed})


def test_dataset_id_is_independent_of_workers_and_metadata_is_complete(tmp_path):
    store = ArtifactStore(tmp_path)
    one, summary = _synthesize(store, 1)
    two, _ = _synthesize(ArtifactStore(tmp_path / "other"), 2)
    assert one.id == two.id
    again, _ = _synthesize(store, 1)
    assert again.id == one.id
    assert summary.accepted == 7 and summary.rejected_by_reason == {C.REJECT_COLLISION: 1}
    assert one.manifest.seeds == {"run": 3} and one.manifest.summary["accepted"] == 7
    ds = open_dataset(store, one.id[:12])
    assert len(ds) == 7 and ds.info["version"] == 1
    assert ds.info["episodes"]["rejected_by_reason"] == {C.REJECT_COLLISION: 1}
    assert ds.info["observation_spec"][0] == [C.OBS_JOINT_POS, 7]
    assert ds.info["topics"][C.TOPIC_JOINT_STATES] == "sensor_msgs/msg/JointState"
    assert [r["index"] for r in ds.rejected()] == [1]
    assert ds.rejected()[0]["reasons"] == [C.REJECT_COLLISION]
    row = ds.index[0]
    assert {"task", "template", "family", "perturbation", "seed", "success", "file"} <= set(row)
    assert ds.episode_path(0).name == "000000.mcap" and ds.index[1]["file"].endswith("02.mcap")
    records = list(ds.episodes())
    assert [r.episode_index for r in records] == [r["index"] for r in ds.index]
    assert all(SIGNOFF(r) == [] for r in records)  # accepted episodes re-validate from files
    stats = ds.stats["observation"][C.OBS_JOINT_POS]
    allq = np.concatenate([r.observations[C.OBS_JOINT_POS] for r in records])
    assert np.allclose(stats["mean"], allq.mean(axis=0)) and stats["count"] == len(allq)
    assert np.allclose(stats["std"], allq.std(axis=0))
    with pytest.raises(ArtifactError):
        open_dataset(store, "0" * 64)


def test_training_table_is_built_from_mcap_and_reused(tmp_path):
    store = ArtifactStore(tmp_path)
    art, _ = _synthesize(store, 1, images=True)
    table = training_table(store, [art.id])
    assert isinstance(table, TrainingTable)
    assert table.root == tmp_path / C.DIR_CACHE / cache_key([art.id])
    assert list(table.obs_spec) == [C.OBS_JOINT_POS, C.OBS_JOINT_VEL, C.OBS_GRIPPER,
                                    C.OBS_TOOL_POSE, C.OBS_OBJECT_POSES]
    assert list(table.action_spec) == [C.ACT_JOINT_TARGET, C.ACT_GRIPPER]
    ds = open_dataset(store, art.id)
    records = list(ds.episodes())
    assert len(table) == sum(r.num_steps for r in records)
    first = records[0]
    expect = np.concatenate([first.observations[k] for k in table.obs_spec], axis=1)
    assert np.array_equal(table.obs[:first.num_steps], expect.astype(np.float32))
    assert np.array_equal(table.image[:first.num_steps], first.images[C.CAMERA_WRIST])
    assert table.episode[-1] == len(records) - 1 and table.dataset_ids == [art.id]
    names = {group_name(r.task, r.template, r.family) for r in records}
    assert set(table.group_names) == names
    assert {table.group_names[g] for g in np.unique(table.group)} == names
    # The same groups from the episode index alone (`clawgym train --weights` checks against
    # them before building a table).
    from clawgym_ros.training.data import episode_group_names

    assert set(episode_group_names(store, [art.id])) == names
    # Reuse: the cached folder is opened as is (a marker file survives).
    (table.root / "marker").write_text("x")
    again = training_table(store, [art.id[:16]])
    assert again.root == table.root and (again.root / "marker").exists()
    other = training_table(store, [art.id], cache_dir=tmp_path / "elsewhere")
    assert other.root.parent == tmp_path / "elsewhere"
    assert np.array_equal(other.obs, table.obs)
    with pytest.raises(ClawgymError):
        training_table(store, [])


def test_train_refuses_a_weights_group_the_dataset_lacks_before_building_a_table(
        tmp_path, capsys, monkeypatch):
    """`clawgym train --weights` with a misspelled group: one line naming it, and the (slow)
    training table was never built."""
    from clawgym_ros.cli import main
    from clawgym_ros.training import data

    store = ArtifactStore(tmp_path)
    art, _ = _synthesize(store, 1, images=False)

    def never(*args, **kwargs):
        raise AssertionError("the training table was built before --weights was checked")

    monkeypatch.setattr(data, "open_training_table", never)
    weights = tmp_path / "w.yaml"
    weights.write_text("pick_place/cube/nosie: 2.0\n")
    code = main(["train", "--dataset", art.id[:12], "--steps", "5", "--seed", "0",
                 "--out", str(tmp_path),
                 "--weights", str(weights)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "group_weights.pick_place/cube/nosie" in err and "a group of the dataset" in err
    assert str(weights) in err and not (tmp_path / C.DIR_CACHE).exists()


@pytest.mark.parametrize("labels", [[], ["a"], ["abc", "de"], ["observation"]])
@pytest.mark.parametrize("values", [[], [1.5], [0.1, -2.0, np.pi, 1e300]])
def test_fast_float64_multiarray_decoder_matches_the_generic_one(labels, values):
    from mcap_ros2.writer import Writer

    buf = io.BytesIO()
    writer = Writer(buf)
    schema = writer.register_msgdef("std_msgs/msg/Float64MultiArray",
                                    message_definition("std_msgs/Float64MultiArray"))
    dims = [{"label": lab, "size": 3, "stride": 7} for lab in labels]
    writer.write_message("x", schema, {"layout": {"dim": dims, "data_offset": 5},
                                       "data": values}, log_time=1)
    writer.finish()
    (_, _, message, decoded), = make_reader(
        io.BytesIO(buf.getvalue()), decoder_factories=[DecoderFactory()]).iter_decoded_messages()
    assert float64_multiarray_data(message.data).tolist() == list(decoded.data) == values
    with pytest.raises(EpisodeFormatError):
        float64_multiarray_data(message.data[:-1] if values else b"\x00\x00")
