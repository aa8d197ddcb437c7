"""One episode <-> one MCAP file with ROS 2 (CDR) messages, readable by ros2 bag and Foxglove.

Topics (log time = sim time of the step in nanoseconds; one message per step unless noted):

=========================== ================================= ==============================
topic                       type                              content
=========================== ================================= ==============================
``joint_states``            sensor_msgs/msg/JointState        true joint position/vel/effort
``joint_trajectory``        trajectory_msgs/msg/JointTrajectory  one point: ``joint_target``
                                                              (+ ``joint_velocity``) action
``gripper_command``         clawgym_interfaces/msg/GripperCommand  ``gripper`` action (width, m)
``cmd_vel``                 geometry_msgs/msg/Twist           ``base_twist`` action (2 or 6)
``<camera>/image_raw``      sensor_msgs/msg/Image             rgb8 frames (when recorded)
``episode/observation``     std_msgs/msg/Float64MultiArray    observation vector (exact)
``episode/action``          std_msgs/msg/Float64MultiArray    action vector (exact)
``episode/physics``         std_msgs/msg/Float64MultiArray    [time, contact force,
                                                              collision 0/1, energy or NaN]
``episode/stages``          std_msgs/msg/String               stage name, at the time reached
``skill_calls``             clawgym_interfaces/msg/SkillCall  one per call, at its start
``perturbation_state``      clawgym_interfaces/msg/PerturbationState  once, at the first step
=========================== ================================= ==============================

The observation/action vectors concatenate keys in the canonical order
(``constants.OBS_STATE_KEYS`` / ``ACTION_KEYS``); the key widths, the episode metadata, goal,
achieved state and outcome are in the MCAP metadata record ``clawgym_episode`` (JSON strings).
Skill arguments are SkillArgument key/value pairs whose values are JSON. Numbers round-trip
exactly (float64); skill and stage times are ROS times (nanosecond resolution).

Output is byte-for-byte reproducible: no wall-clock anywhere, fixed chunk size and compression,
messages written in time order.

Encoding: the per-step messages with a fixed layout within an episode (JointState,
Float64MultiArray, one-point JointTrajectory, GripperCommand, Twist) are encoded for all steps
at once with NumPy (:class:`FixedCdr`: the constant bytes once, stamps and float64 values
written into their offsets); the other messages go through mcap-ros2-support's generic CDR
encoder. Both produce the same bytes (``encode_episode(..., fast=False)`` encodes everything
generically; a test compares the files byte for byte).
"""

from __future__ import annotations

import io
import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import mcap
import mcap_ros2
import numpy as np
from mcap.reader import make_reader
from mcap.records import MessageIndex
from mcap.well_known import SchemaEncoding
from mcap.writer import LIBRARY_IDENTIFIER, CompressionType
from mcap.writer import Writer as McapWriter
from mcap_ros2._dynamic import serialize_dynamic
from mcap_ros2.decoder import DecoderFactory

from clawgym_ros import constants as C
from clawgym_ros.dataset.msgdefs import message_definition
from clawgym_ros.errors import ClawgymError
from clawgym_ros.synthesis.episode import (
    EpisodeRecord,
    Outcome,
    SkillCall,
    StageEvent,
    ordered_keys,
)

EPISODE_FORMAT_VERSION = 1
CHUNK_SIZE = 4 * 1024 * 1024
COMPRESSION = CompressionType.ZSTD

T_JOINT_STATE = "sensor_msgs/msg/JointState"
T_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
T_GRIPPER = "clawgym_interfaces/msg/GripperCommand"
T_TWIST = "geometry_msgs/msg/Twist"
T_IMAGE = "sensor_msgs/msg/Image"
T_ARRAY = "std_msgs/msg/Float64MultiArray"
T_STRING = "std_msgs/msg/String"
T_SKILL = "clawgym_interfaces/msg/SkillCall"
T_PERTURBATION = "clawgym_interfaces/msg/PerturbationState"
MESSAGE_TYPES: tuple[str, ...] = (T_JOINT_STATE, T_TRAJECTORY, T_GRIPPER, T_TWIST, T_IMAGE,
                                  T_ARRAY, T_STRING, T_SKILL, T_PERTURBATION)

#: SkillCall.outcome codes of constants.SKILL_OUTCOMES (PENDING=0 reads back as failed).
OUTCOME_CODES = {C.SKILL_OK: 1, C.SKILL_FAILED: 2, C.SKILL_SKIPPED: 3}
_OUTCOME_NAMES = {v: k for k, v in OUTCOME_CODES.items()}
GRIPPER_MODE_WIDTH = 0


class EpisodeFormatError(ClawgymError):
    """An MCAP file is not a clawgym episode (or of an unsupported version)."""


def image_topic(camera: str) -> str:
    """Topic of a camera's frames in an episode file."""
    return f"{camera}/{C.TOPIC_IMAGE_RAW}"


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _layout(label: str, size: int) -> dict[str, Any]:
    return {"dim": [{"label": label, "size": size, "stride": size}], "data_offset": 0}


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def write_episode(record: EpisodeRecord, out: str | Path | BinaryIO, *,
                  images: bool = True) -> None:
    """Write ``record`` as one MCAP file (path or binary stream).

    Args:
        record: a validated record.
        out: destination path or writable binary stream.
        images: write camera frames (when the record has any).
    """
    if isinstance(out, (str, Path)):
        Path(out).write_bytes(encode_episode(record, images=images))
        return
    out.write(encode_episode(record, images=images))


class FixedCdr:
    """The CDR (little endian) bytes of a message whose layout is fixed across an episode.

    Constant fields (strings, counts, zeros) are written once; :meth:`stamp` and
    :meth:`float64` reserve slots that :meth:`fill` writes for every step with NumPy. Alignment
    follows the CDR rules of mcap-ros2-support's encoder (relative to the end of the 4-byte
    encapsulation header; an empty float64 sequence adds no padding).
    """

    def __init__(self) -> None:
        self.buf = bytearray(b"\x00\x01\x00\x00")
        self.slots: list[tuple[int, str, int]] = []     # (offset, key, count); key "" = stamp

    def _align(self, size: int) -> None:
        self.buf += bytes(-(len(self.buf) - 4) % size)

    def uint8(self, value: int) -> None:
        self.buf += struct.pack("<B", value)

    def uint32(self, value: int) -> None:
        self._align(4)
        self.buf += struct.pack("<I", value)

    def string(self, value: str) -> None:
        data = value.encode("utf-8")
        self.uint32(len(data) + 1)
        self.buf += data + b"\0"

    def strings(self, values: list[str]) -> None:
        self.uint32(len(values))
        for v in values:
            self.string(v)

    def header(self) -> None:
        """std_msgs/Header with the step's stamp and an empty frame id."""
        self._align(4)
        self.slots.append((len(self.buf), "", 2))
        self.buf += bytes(8)
        self.string("")

    def float64(self, key: str, count: int = 1) -> None:
        """``count`` float64 values of column block ``key`` (fixed-size fields)."""
        if count:
            self._align(8)
            self.slots.append((len(self.buf), key, count))
            self.buf += bytes(8 * count)

    def float64_seq(self, key: str, count: int) -> None:
        """A float64 sequence of ``count`` values of ``key``."""
        self.uint32(count)
        self.float64(key, count)

    def multi_array(self, label: str, count: int, key: str) -> None:
        """std_msgs/Float64MultiArray with one dimension."""
        self.uint32(1)
        self.string(label)
        self.uint32(count)
        self.uint32(count)
        self.uint32(0)
        self.float64_seq(key, count)

    def fill(self, stamps: np.ndarray, values: Mapping[str, np.ndarray]) -> list[bytes]:
        """The messages of all steps.

        Args:
            stamps: (T, 2) int (sec, nanosec) per step.
            values: key -> (T, count) float64 per slot.
        """
        n, size = len(stamps), len(self.buf)
        out = np.empty((n, size), dtype=np.uint8)
        out[:] = np.frombuffer(bytes(self.buf), dtype=np.uint8)
        for offset, key, count in self.slots:
            if key:
                block = np.ascontiguousarray(values[key], dtype="<f8").reshape(n, count)
            else:
                block = np.ascontiguousarray(stamps, dtype="<i4").reshape(n, 2)
            out[:, offset:offset + block.itemsize * count] = block.view(np.uint8).reshape(n, -1)
        data = out.tobytes()
        return [data[k * size:(k + 1) * size] for k in range(n)]


_GENERIC: dict[str, Any] = {}


def _generic_encoder(type_name: str) -> Any:
    """mcap-ros2-support's CDR encoder of ``type_name`` (parsed once per process)."""
    if type_name not in _GENERIC:
        _GENERIC[type_name] = serialize_dynamic(type_name, message_definition(type_name))[
            type_name]
    return _GENERIC[type_name]


#: Message record head: opcode, record length, channel id, sequence, log and publish time.
_MESSAGE_HEAD = struct.Struct("<BQHIQQ")
_MESSAGE_OPCODE = 0x05
#: The mcap release whose ``Writer.add_message`` :meth:`_Ros2Writer._add_message` reproduces.
_FAST_MCAP = "1.6.0"


class _Ros2Writer:
    """An MCAP writer with the ros2 profile (as mcap-ros2-support's Writer writes it) that
    takes messages already encoded as CDR bytes.

    Args:
        buf: the output stream.
        fast: add messages with :meth:`_add_message` (the same bytes as ``add_message``, a
            quarter of its cost) when the installed mcap is the release it reproduces.
    """

    def __init__(self, buf: BinaryIO, fast: bool = True) -> None:
        self._writer = McapWriter(buf, chunk_size=CHUNK_SIZE, compression=COMPRESSION,
                                  enable_crcs=True)
        self._fast = fast and mcap.__version__ == _FAST_MCAP
        self._writer.start(profile="ros2", library=f"{LIBRARY_IDENTIFIER} "
                                                   f"mcap-ros2-support/{mcap_ros2.__version__}")
        self._schemas = {t: self._writer.register_schema(t, SchemaEncoding.ROS2,
                                                         message_definition(t).encode())
                         for t in MESSAGE_TYPES}
        self._channels: dict[str, int] = {}
        self._seq = 0

    def put(self, topic: str, type_name: str, data: bytes, ns: int) -> None:
        channel = self._channels.get(topic)
        if channel is None:
            channel = self._writer.register_channel(topic=topic, message_encoding="cdr",
                                                    schema_id=self._schemas[type_name])
            self._channels[topic] = channel
        if self._fast:
            self._add_message(channel, ns, data)
        else:
            self._writer.add_message(channel_id=channel, log_time=ns, publish_time=ns,
                                     sequence=self._seq, data=data)
        self._seq += 1

    def _add_message(self, channel: int, ns: int, data: bytes) -> None:
        """``Writer.add_message`` of mcap 1.6.0 (chunked writer; log = publish time) without
        its per-message record objects and its five small writes: the same statistics, chunk
        message index and record bytes. ~2,200 messages per demonstration make this most of
        the encoding time (test_dataset_mcap compares the bytes with the library's)."""
        w = self._writer
        stats = w._Writer__statistics                                   # noqa: SLF001
        if stats.message_count == 0:
            stats.message_start_time = ns
        else:
            stats.message_start_time = min(ns, stats.message_start_time)
        stats.message_end_time = max(ns, stats.message_end_time)
        stats.channel_message_counts[channel] += 1
        stats.message_count += 1
        chunk = w._Writer__chunk_builder                                # noqa: SLF001
        if chunk.num_messages == 0:
            chunk.message_start_time = ns
        else:
            chunk.message_start_time = min(chunk.message_start_time, ns)
        chunk.message_end_time = max(chunk.message_end_time, ns)
        index = chunk.message_indices.get(channel)
        if index is None:
            index = chunk.message_indices[channel] = MessageIndex(channel_id=channel,
                                                                  records=[])
        out = chunk.record_writer._buffer                               # noqa: SLF001
        index.records.append((ns, out.tell()))
        chunk.num_messages += 1
        out.write(_MESSAGE_HEAD.pack(_MESSAGE_OPCODE, 22 + len(data), channel, self._seq,
                                     ns, ns))
        out.write(data)
        if out.tell() > w._Writer__chunk_size:                          # noqa: SLF001
            w._Writer__finalize_chunk()                                 # noqa: SLF001

    def put_message(self, topic: str, type_name: str, msg: Any, ns: int) -> None:
        self.put(topic, type_name, _generic_encoder(type_name)(msg), ns)

    def finish(self, metadata: dict[str, str]) -> None:
        self._writer.add_metadata(C.MCAP_METADATA_EPISODE, metadata)
        self._writer.finish()


def encode_episode(record: EpisodeRecord, *, images: bool = True, fast: bool = True) -> bytes:
    """The MCAP bytes of ``record`` (deterministic: same record, same bytes).

    Args:
        record: a validated record.
        images: write camera frames (when the record has any).
        fast: encode the fixed-layout per-step messages with NumPy (:class:`FixedCdr`);
            False = mcap-ros2-support's generic encoder for every message (same bytes).
    """
    record.validate()
    buf = io.BytesIO()
    writer = _Ros2Writer(buf, fast=fast)
    obs_keys = ordered_keys(record.observations, C.OBS_STATE_KEYS)
    act_keys = ordered_keys(record.actions, C.ACTION_KEYS)
    n = record.num_steps
    obs = (np.concatenate([record.observations[k] for k in obs_keys], axis=1) if obs_keys
           else np.zeros((n, 0)))
    act = (np.concatenate([record.actions[k] for k in act_keys], axis=1) if act_keys
           else np.zeros((n, 0)))
    energy = record.energy if record.energy is not None else np.full(n, np.nan)
    physics = np.stack([record.time, record.contact_force, record.collision.astype(np.float64),
                        energy], axis=1)
    cams = {k: v for k, v in record.images.items()} if images else {}
    names = list(record.joint_names)
    arm = [j for j in names if j in C.ARM_JOINTS] or names
    target = record.actions.get(C.ACT_JOINT_TARGET)
    target_vel = record.actions.get(C.ACT_JOINT_VEL)
    gripper = record.actions.get(C.ACT_GRIPPER)
    twist = record.actions.get(C.ACT_BASE_TWIST)
    if twist is not None and twist.shape[1] not in (2, 6):
        twist = None
    elif twist is not None and twist.shape[1] == 2:
        twist = np.stack([twist[:, 0], *([np.zeros(n)] * 4), twist[:, 1]], axis=1)
    events = sorted(
        [(_ns(s.time), 0, i) for i, s in enumerate(record.stages)]
        + [(_ns(c.start), 1, i) for i, c in enumerate(record.skill_calls)])
    t_ns = [_ns(t) for t in record.time]
    stamps = np.array([[ns // 1_000_000_000, ns % 1_000_000_000] for ns in t_ns],
                      dtype=np.int64).reshape(n, 2)
    values = {"position": record.joint_position, "velocity": record.joint_velocity,
              "effort": record.joint_effort, "obs": obs, "act": act, "physics": physics,
              "target": target, "target_vel": target_vel, "twist": twist,
              "width": None if gripper is None else gripper[:, :1], "zero": np.zeros((n, 1))}
    # (topic, type, layout) of the per-step fixed-layout messages, in the order written
    streams: list[tuple[str, str, FixedCdr]] = []

    def layout(topic: str, type_name: str) -> FixedCdr:
        streams.append((topic, type_name, FixedCdr()))
        return streams[-1][2]

    m = layout(C.TOPIC_JOINT_STATES, T_JOINT_STATE)
    m.header()
    m.strings(names)
    for key in ("position", "velocity", "effort"):
        m.float64_seq(key, len(names))
    layout(C.TOPIC_EPISODE_OBSERVATION, T_ARRAY).multi_array("observation", obs.shape[1], "obs")
    layout(C.TOPIC_EPISODE_ACTION, T_ARRAY).multi_array("action", act.shape[1], "act")
    layout(C.TOPIC_EPISODE_PHYSICS, T_ARRAY).multi_array(
        "time,contact_force,collision,energy", 4, "physics")
    if target is not None:
        m = layout(C.TOPIC_JOINT_TRAJECTORY, T_TRAJECTORY)
        m.header()
        m.strings(arm[:target.shape[1]])
        m.uint32(1)                                          # one point
        m.float64_seq("target", target.shape[1])
        m.float64_seq("target_vel", 0 if target_vel is None else target_vel.shape[1])
        m.float64_seq("", 0)                                 # accelerations
        m.float64_seq("", 0)                                 # effort
        m.uint32(0)                                          # time_from_start: sec (int32 0)
        m.uint32(0)                                          # nanosec
    if gripper is not None:
        m = layout(C.TOPIC_GRIPPER_COMMAND, T_GRIPPER)
        m.uint8(GRIPPER_MODE_WIDTH)
        m.float64("width")
        m.float64("zero")                                    # max_effort
    if twist is not None:
        layout(C.TOPIC_CMD_VEL, T_TWIST).float64("twist", 6)
    if fast:
        payloads = [mm.fill(stamps, values) for _, _, mm in streams]
    else:
        payloads = [[_generic_encoder(type_name)(msg) for msg in
                     _generic_messages(topic, values, names, arm, stamps)]
                    for topic, type_name, _ in streams]
    ev_i = 0
    for step, ns in enumerate(t_ns):
        # Stage and skill events up to this step's time, in time order, before the step.
        while ev_i < len(events) and events[ev_i][0] <= ns:
            _put_event(writer, record, events[ev_i])
            ev_i += 1
        if step == 0:
            writer.put_message(C.TOPIC_PERTURBATION_STATE, T_PERTURBATION,
                               _perturbation_msg(record, {"stamp": _stamp(ns), "frame_id": ""}),
                               ns)
        for (topic, type_name, _), data in zip(streams, payloads, strict=True):
            writer.put(topic, type_name, data[step], ns)
        for cam in sorted(cams):
            frame = cams[cam][step]
            writer.put_message(image_topic(cam), T_IMAGE, {
                "header": {"stamp": _stamp(ns), "frame_id": cam}, "height": frame.shape[0],
                "width": frame.shape[1], "encoding": "rgb8", "is_bigendian": 0,
                "step": frame.shape[1] * 3, "data": frame.tobytes()}, ns)
    for event in events[ev_i:]:
        _put_event(writer, record, event)
    writer.finish(_metadata(record, obs_keys, act_keys, cams))
    return buf.getvalue()


def _generic_messages(topic: str, values: Mapping[str, Any], names: list[str],
                      arm: list[str], stamps: np.ndarray) -> list[dict[str, Any]]:
    """The per-step messages of a fixed-layout topic as dicts (the generic encoder's input)."""
    out = []
    for step, (sec, nsec) in enumerate(stamps.tolist()):
        header = {"stamp": {"sec": sec, "nanosec": nsec}, "frame_id": ""}
        if topic == C.TOPIC_JOINT_STATES:
            msg: dict[str, Any] = {"header": header, "name": names, **{
                k: values[k][step].tolist() for k in ("position", "velocity", "effort")}}
        elif topic == C.TOPIC_EPISODE_OBSERVATION:
            msg = {"layout": _layout("observation", values["obs"].shape[1]),
                   "data": values["obs"][step].tolist()}
        elif topic == C.TOPIC_EPISODE_ACTION:
            msg = {"layout": _layout("action", values["act"].shape[1]),
                   "data": values["act"][step].tolist()}
        elif topic == C.TOPIC_EPISODE_PHYSICS:
            msg = {"layout": _layout("time,contact_force,collision,energy", 4),
                   "data": values["physics"][step].tolist()}
        elif topic == C.TOPIC_JOINT_TRAJECTORY:
            target, vel = values["target"], values["target_vel"]
            point = {"positions": target[step].tolist(),
                     "velocities": vel[step].tolist() if vel is not None else [],
                     "time_from_start": {"sec": 0, "nanosec": 0}}
            msg = {"header": header, "joint_names": arm[:target.shape[1]], "points": [point]}
        elif topic == C.TOPIC_GRIPPER_COMMAND:
            msg = {"mode": GRIPPER_MODE_WIDTH, "width": float(values["width"][step, 0]),
                   "max_effort": 0.0}
        else:
            msg = _twist_msg(values["twist"][step])
        out.append(msg)
    return out


def _put_event(writer: _Ros2Writer, record: EpisodeRecord, event: tuple[int, int, int]
               ) -> None:
    ns, kind, i = event
    if kind == 0:
        writer.put_message(C.TOPIC_EPISODE_STAGES, T_STRING, {"data": record.stages[i].name},
                           ns)
        return
    call = record.skill_calls[i]
    writer.put_message(C.TOPIC_SKILL_CALLS, T_SKILL, {
        "name": call.name,
        "arguments": [{"key": k, "value": _json(v)} for k, v in sorted(call.args.items())],
        "start": _stamp(_ns(call.start)), "end": _stamp(_ns(call.end)),
        "outcome": OUTCOME_CODES[call.outcome], "detail": call.detail}, ns)


def _perturbation_msg(record: EpisodeRecord, header: dict[str, Any]) -> dict[str, Any]:
    return {
        "header": header, "family": record.family, "intensity": float(record.intensity),
        "schedule": record.perturbation_schedule, "seed": int(record.seed) % (1 << 64),
        "active": record.family != C.FAMILY_NONE,
        "parameters": [{"name": k, "value": v}
                       for k, v in sorted(record.perturbation_params.items())],
    }


def _twist_msg(values: np.ndarray) -> dict[str, Any]:
    v = [float(x) for x in values]
    if len(v) == 2:
        v = [v[0], 0.0, 0.0, 0.0, 0.0, v[1]]
    return {"linear": {"x": v[0], "y": v[1], "z": v[2]},
            "angular": {"x": v[3], "y": v[4], "z": v[5]}}


def _metadata(record: EpisodeRecord, obs_keys: list[str], act_keys: list[str],
              cams: Mapping[str, np.ndarray]) -> dict[str, str]:
    # "origin" only when there is one: ordinary episodes keep their bytes (and dataset ids).
    origin = {"origin": _json(record.origin)} if record.origin else {}
    return {**origin,
        "format_version": str(EPISODE_FORMAT_VERSION),
        "meta": _json({"task": record.task, "template": record.template,
                       "family": record.family, "intensity": record.intensity,
                       "difficulty": record.difficulty, "episode_index": record.episode_index,
                       "seed": record.seed, "perturbation_params": record.perturbation_params,
                       "perturbation_schedule": record.perturbation_schedule}),
        "joint_names": _json(list(record.joint_names)),
        "observation_spec": _json([[k, int(record.observations[k].shape[1])] for k in obs_keys]),
        "action_spec": _json([[k, int(record.actions[k].shape[1])] for k in act_keys]),
        "has_energy": _json(record.energy is not None),
        "images": _json({k: list(v.shape[1:3]) for k, v in sorted(cams.items())}),
        "goal": _json(record.goal),
        "achieved": _json(record.achieved),
        "outcome": _json({"success": record.outcome.success, "reason": record.outcome.reason}),
        "summary": _json(record.summary()),
    }


# --- reading --------------------------------------------------------------------------------


def read_episode_metadata(source: str | Path | bytes) -> dict[str, Any]:
    """The decoded ``clawgym_episode`` metadata record of an episode file (JSON values parsed).

    Raises:
        EpisodeFormatError: no such record or an unsupported version.
    """
    with _open(source) as stream:
        try:
            metas = list(make_reader(stream).iter_metadata())
        except Exception as err:  # noqa: BLE001 (mcap raises many kinds on corrupt input)
            raise EpisodeFormatError(f"{_name(source)} is not a readable MCAP file: "
                                     f"{err}") from None
    for meta in metas:
        if meta.name == C.MCAP_METADATA_EPISODE:
            return _parse_metadata(dict(meta.metadata), source)
    raise EpisodeFormatError(f"{_name(source)} has no {C.MCAP_METADATA_EPISODE} metadata")


def read_episode(source: str | Path | bytes, *, images: bool = True) -> EpisodeRecord:
    """Read an episode file back into an :class:`EpisodeRecord` (arrays equal to those written).

    Args:
        source: path or the file's bytes.
        images: also decode camera frames.

    Raises:
        EpisodeFormatError: not an episode file, or inconsistent content.
    """
    meta = read_episode_metadata(source)
    obs_spec, act_spec = meta["observation_spec"], meta["action_spec"]
    topics = [C.TOPIC_JOINT_STATES, C.TOPIC_EPISODE_OBSERVATION, C.TOPIC_EPISODE_ACTION,
              C.TOPIC_EPISODE_PHYSICS, C.TOPIC_EPISODE_STAGES, C.TOPIC_SKILL_CALLS]
    if images:
        topics += [image_topic(cam) for cam in meta["images"]]
    rows: dict[str, list[Any]] = {t: [] for t in topics}
    with _open(source) as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for _, channel, message, msg in reader.iter_decoded_messages(topics=topics,
                                                                     log_time_order=False):
            rows[channel.topic].append((message.log_time, msg))
    joint = rows[C.TOPIC_JOINT_STATES]
    physics = np.array([m.data for _, m in rows[C.TOPIC_EPISODE_PHYSICS]], dtype=np.float64)
    if not joint or len(joint) != len(physics):
        raise EpisodeFormatError(f"{_name(source)}: {len(joint)} joint_states but "
                                 f"{len(physics)} physics messages")
    obs = np.array([m.data for _, m in rows[C.TOPIC_EPISODE_OBSERVATION]], dtype=np.float64)
    act = np.array([m.data for _, m in rows[C.TOPIC_EPISODE_ACTION]], dtype=np.float64)
    steps = len(physics)
    observations = _split(obs.reshape(steps, -1), obs_spec)
    actions = _split(act.reshape(steps, -1), act_spec)
    frames = {}
    for cam, (height, width) in meta["images"].items() if images else ():
        data = rows[image_topic(cam)]
        frames[cam] = np.stack([np.frombuffer(bytes(m.data), np.uint8).reshape(height, width, 3)
                                for _, m in data])
    calls = [SkillCall(name=m.name, args={a.key: json.loads(a.value) for a in m.arguments},
                       start=_sec(m.start), end=_sec(m.end),
                       outcome=_OUTCOME_NAMES.get(m.outcome, C.SKILL_FAILED), detail=m.detail)
             for _, m in rows[C.TOPIC_SKILL_CALLS]]
    stages = [StageEvent(m.data, t / 1e9) for t, m in rows[C.TOPIC_EPISODE_STAGES]]
    info = meta["meta"]
    return EpisodeRecord(
        task=info["task"], template=info["template"], family=info["family"],
        intensity=info["intensity"], difficulty=info["difficulty"],
        episode_index=info["episode_index"], seed=info["seed"],
        perturbation_params=info["perturbation_params"],
        perturbation_schedule=info["perturbation_schedule"],
        time=physics[:, 0], joint_names=tuple(meta["joint_names"]),
        joint_position=np.array([m.position for _, m in joint], dtype=np.float64),
        joint_velocity=np.array([m.velocity for _, m in joint], dtype=np.float64),
        joint_effort=np.array([m.effort for _, m in joint], dtype=np.float64),
        observations=observations, actions=actions, contact_force=physics[:, 1],
        collision=physics[:, 2] > 0.5, energy=physics[:, 3] if meta["has_energy"] else None,
        images=frames, skill_calls=calls, stages=stages, goal=meta["goal"],
        achieved=meta["achieved"],
        outcome=Outcome(meta["outcome"]["success"], meta["outcome"]["reason"]),
        origin=dict(meta.get("origin") or {}),
    )


def read_episode_vectors(source: str | Path | bytes) -> tuple[dict[str, Any], np.ndarray,
                                                              np.ndarray]:
    """Only what a training table needs: metadata, (T, obs_dim) and (T, act_dim) vectors.

    Decodes the Float64MultiArray payloads with NumPy (several times faster than the generic
    decoder; the round-trip tests check both agree).
    """
    meta = read_episode_metadata(source)
    topics = [C.TOPIC_EPISODE_OBSERVATION, C.TOPIC_EPISODE_ACTION]
    rows: dict[str, list[Any]] = {t: [] for t in topics}
    with _open(source) as stream:
        for _, channel, message in make_reader(stream).iter_messages(topics=topics,
                                                                      log_time_order=False):
            rows[channel.topic].append(float64_multiarray_data(message.data))
    obs_dim = sum(w for _, w in meta["observation_spec"])
    act_dim = sum(w for _, w in meta["action_spec"])
    obs = np.array(rows[topics[0]], dtype=np.float64).reshape(-1, obs_dim)
    act = np.array(rows[topics[1]], dtype=np.float64).reshape(-1, act_dim)
    return meta, obs, act


def float64_multiarray_data(raw: bytes) -> np.ndarray:
    """The ``data`` field of a CDR-encoded std_msgs/Float64MultiArray, as a float64 array.

    Raises:
        EpisodeFormatError: not little-endian CDR or truncated.
    """
    if len(raw) < 4 or raw[1] != 1:
        raise EpisodeFormatError("Float64MultiArray payload is not little-endian CDR")
    body = memoryview(raw)[4:]
    try:
        pos = 0
        (count,) = struct.unpack_from("<I", body, pos)
        pos += 4
        for _ in range(count):
            (length,) = struct.unpack_from("<I", body, pos)
            pos += 4 + length
            pos = (pos + 3) & ~3
            pos += 8  # size, stride
        pos += 4  # data_offset
        (length,) = struct.unpack_from("<I", body, pos)
        if length == 0:
            return np.zeros(0, dtype=np.float64)
        pos = (pos + 4 + 7) & ~7
        if pos + 8 * length > len(body):
            raise struct.error("truncated data")
        return np.frombuffer(body, dtype="<f8", count=length, offset=pos)
    except struct.error as err:
        raise EpisodeFormatError(f"Float64MultiArray payload is malformed: {err}") from None


def _split(matrix: np.ndarray, spec: list[tuple[str, int]]) -> dict[str, np.ndarray]:
    out, col = {}, 0
    for key, width in spec:
        out[key] = matrix[:, col:col + width].copy()
        col += width
    return out


def _sec(stamp: Any) -> float:
    return (stamp.sec * 1_000_000_000 + stamp.nanosec) / 1e9


def _parse_metadata(raw: dict[str, str], source: Any) -> dict[str, Any]:
    version = raw.get("format_version")
    if version != str(EPISODE_FORMAT_VERSION):
        raise EpisodeFormatError(f"{_name(source)}: episode format version {version!r}, "
                                 f"expected {EPISODE_FORMAT_VERSION}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        out[key] = value if key == "format_version" else json.loads(
            value, parse_constant=lambda c: {"NaN": math.nan, "Infinity": math.inf,
                                             "-Infinity": -math.inf}[c])
    out["observation_spec"] = [(k, int(w)) for k, w in out["observation_spec"]]
    out["action_spec"] = [(k, int(w)) for k, w in out["action_spec"]]
    return out


def _open(source: str | Path | bytes) -> Any:
    if isinstance(source, (bytes, bytearray)):
        return io.BytesIO(source)
    try:
        return open(source, "rb")
    except OSError as err:
        raise EpisodeFormatError(f"cannot read episode file {source}: {err.strerror}") from None


def _name(source: Any) -> str:
    return "<bytes>" if isinstance(source, (bytes, bytearray)) else str(source)
