"""A recorded robot log as arrays, read from an MCAP file or a rosbag2 folder, and the package's
writer of such logs.

Topics (names from :mod:`clawgym_ros.constants`; stamps are the messages' header stamps, the
robot's clock):

===================== ================================== ==================================
topic                 type                               use
===================== ================================== ==================================
``joint_states``      sensor_msgs/msg/JointState         required: arm joint position,
                                                         velocity, effort (the fitted signal)
``joint_trajectory``  trajectory_msgs/msg/JointTrajectory required: the commands sent (first
                                                         point: positions, velocities)
``object_poses``      geometry_msgs/msg/PoseArray        optional: free objects, in the
                                                         scene's object order (initial state;
                                                         whether they moved)
===================== ================================== ==================================

An MCAP file is read with ``mcap`` + ``mcap-ros2-support``; a rosbag2 folder (``metadata.yaml``
with MCAP or SQLite storage, as ``ros2 bag record`` or the ``rosbags`` library writes it) with
``rosbags``. Both give the same arrays for the same messages.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError

T_JOINT_STATE = "sensor_msgs/msg/JointState"
T_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
T_POSE_ARRAY = "geometry_msgs/msg/PoseArray"
#: topic -> (type, required)
LOG_TOPICS: dict[str, tuple[str, bool]] = {
    C.TOPIC_JOINT_STATES: (T_JOINT_STATE, True),
    C.TOPIC_JOINT_TRAJECTORY: (T_TRAJECTORY, True),
    C.TOPIC_OBJECT_POSES: (T_POSE_ARRAY, False),
}
#: MCAP metadata record written by :func:`write_log` (facts about the recording, never the
#: twin's hidden values)
METADATA_NAME = "clawgym_robot_log"
#: fewest joint state samples a calibration accepts
MIN_SAMPLES = 50


class LogError(ClawgymError):
    """A robot log cannot be used: unreadable, missing a topic, inconsistent stamps or names."""


@dataclasses.dataclass
class RobotLog:
    """What a calibration needs from a log (times in seconds on the log's clock).

    Attributes:
        source: the file or folder read.
        joint_names: names in the joint state messages (arm joints first is not required).
        t: (N,) joint state stamps, strictly increasing.
        position, velocity, effort: (N, J) in ``joint_names`` order (NaN where a message
            carried no velocity or effort).
        cmd_t: (M,) command stamps, non-decreasing.
        cmd_names: joint names of the commands.
        cmd_position, cmd_velocity: (M, len(cmd_names)) first point of each command (velocity
            zero where the command carried none).
        object_t: (K,) object pose stamps; object_poses: (K, n, 7) x y z qw qx qy qz.
        metadata: the log's ``clawgym_robot_log`` metadata (empty for other logs).
    """

    source: str
    joint_names: tuple[str, ...]
    t: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    cmd_t: np.ndarray
    cmd_names: tuple[str, ...]
    cmd_position: np.ndarray
    cmd_velocity: np.ndarray
    object_t: np.ndarray
    object_poses: np.ndarray
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    def arm(self, names: Sequence[str] = C.ARM_JOINTS) -> np.ndarray:
        """Column indexes of ``names`` in the joint states (LogError naming the missing)."""
        return _columns(self.joint_names, names, self.source, C.TOPIC_JOINT_STATES)


def _columns(have: Sequence[str], want: Sequence[str], source: str, topic: str) -> np.ndarray:
    missing = [n for n in want if n not in have]
    if missing:
        raise LogError(f"{source}: {topic} names joints {list(have)[:9]}, not this robot's: "
                       f"missing {', '.join(missing)} (expected {', '.join(want)})")
    return np.array([list(have).index(n) for n in want], dtype=int)


def _sec(stamp: Any) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


# ------------------------------------------------------------------------------------ reading
def read_log(path: str | Path) -> RobotLog:
    """Read a robot log: an ``.mcap`` file or a rosbag2 folder.

    Raises:
        LogError: unreadable or truncated file, a required topic missing or of another type,
            too few samples, stamps that go back in time, joint names that change.
    """
    path = Path(path)
    if path.is_dir():
        topics, metadata = _read_rosbag2(path)
    elif path.is_file():
        topics, metadata = _read_mcap(path)
    else:
        raise LogError(f"{path}: no such file or folder (expected an .mcap file or a rosbag2 "
                       "folder)")
    return _assemble(str(path), topics, metadata)


def _check_types(source: str, found: dict[str, str]) -> None:
    for topic, (type_name, required) in LOG_TOPICS.items():
        if topic not in found:
            if required:
                raise LogError(f"{source}: required topic {topic} ({type_name}) is missing; "
                               f"topics in the log: {', '.join(sorted(found)) or 'none'}")
            continue
        if found[topic] != type_name:
            raise LogError(f"{source}: topic {topic} has type {found[topic]}, expected "
                           f"{type_name}")


def _read_mcap(path: Path) -> tuple[dict[str, list[tuple[float, Any]]], dict[str, Any]]:
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    data = path.read_bytes()
    out: dict[str, list[tuple[float, Any]]] = {t: [] for t in LOG_TOPICS}
    metadata: dict[str, Any] = {}
    try:
        reader = make_reader(io.BytesIO(data), decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        if summary is None:
            raise ValueError("no summary section (the file ends early: truncated?)")
        found = {ch.topic: summary.schemas[ch.schema_id].name
                 for ch in summary.channels.values()}
        _check_types(str(path), found)
        for meta in reader.iter_metadata():
            if meta.name == METADATA_NAME:
                metadata = {k: json.loads(v) for k, v in meta.metadata.items()}
        wanted = [t for t in LOG_TOPICS if t in found]
        for _, channel, _, msg in reader.iter_decoded_messages(topics=wanted,
                                                               log_time_order=False):
            out[channel.topic].append(msg)
    except LogError:
        raise
    except Exception as err:  # noqa: BLE001 (mcap raises many kinds on corrupt input)
        raise LogError(f"{path}: not a readable MCAP file ({type(err).__name__}: "
                       f"{str(err)[:200]}); a truncated or damaged recording?") from None
    return out, metadata


def _read_rosbag2(path: Path) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    from rosbags.highlevel import AnyReader

    out: dict[str, list[Any]] = {t: [] for t in LOG_TOPICS}
    try:
        with AnyReader([path]) as reader:
            found = {c.topic.lstrip("/"): c.msgtype for c in reader.connections}
            _check_types(str(path), found)
            conns = [c for c in reader.connections if c.topic.lstrip("/") in LOG_TOPICS]
            for conn, _, raw in reader.messages(connections=conns):
                out[conn.topic.lstrip("/")].append(reader.deserialize(raw, conn.msgtype))
    except LogError:
        raise
    except Exception as err:  # noqa: BLE001 (rosbags raises many kinds on corrupt input)
        raise LogError(f"{path}: not a readable rosbag2 folder ({type(err).__name__}: "
                       f"{str(err)[:200]})") from None
    return out, {}


def _assemble(source: str, topics: dict[str, list[Any]], metadata: dict[str, Any]) -> RobotLog:
    js = topics[C.TOPIC_JOINT_STATES]
    if len(js) < MIN_SAMPLES:
        raise LogError(f"{source}: {C.TOPIC_JOINT_STATES} has {len(js)} messages, at least "
                       f"{MIN_SAMPLES} needed")
    names = tuple(js[0].name)
    for k, msg in enumerate(js):
        if tuple(msg.name) != names:
            raise LogError(f"{source}: {C.TOPIC_JOINT_STATES} message {k} names joints "
                           f"{list(msg.name)[:9]}, the first named {list(names)[:9]}")
    n = len(names)

    def column(msg: Any, field: str) -> np.ndarray:
        values = np.asarray(getattr(msg, field), dtype=np.float64)
        return values if len(values) == n else np.full(n, np.nan)

    t = np.array([_sec(m.header.stamp) for m in js])
    _check_stamps(source, C.TOPIC_JOINT_STATES, t, strict=True)
    cmds = topics[C.TOPIC_JOINT_TRAJECTORY]
    cmds = [m for m in cmds if len(m.points)]
    if not cmds:
        raise LogError(f"{source}: {C.TOPIC_JOINT_TRAJECTORY} has no command with a point")
    cmd_names = tuple(cmds[0].joint_names)
    for k, msg in enumerate(cmds):
        if tuple(msg.joint_names) != cmd_names:
            raise LogError(f"{source}: {C.TOPIC_JOINT_TRAJECTORY} message {k} names joints "
                           f"{list(msg.joint_names)[:9]}, the first named "
                           f"{list(cmd_names)[:9]}")
    cmd_t = np.array([_sec(m.header.stamp) for m in cmds])
    _check_stamps(source, C.TOPIC_JOINT_TRAJECTORY, cmd_t, strict=False)
    m_cmd = len(cmd_names)
    cmd_pos = np.array([np.asarray(m.points[0].positions, dtype=np.float64) for m in cmds])
    cmd_vel = np.array([np.asarray(m.points[0].velocities, dtype=np.float64)
                        if len(m.points[0].velocities) == m_cmd else np.zeros(m_cmd)
                        for m in cmds])
    if cmd_pos.shape != (len(cmds), m_cmd):
        raise LogError(f"{source}: {C.TOPIC_JOINT_TRAJECTORY} points do not all carry "
                       f"{m_cmd} positions")
    poses = topics.get(C.TOPIC_OBJECT_POSES) or []
    obj_t = np.array([_sec(m.header.stamp) for m in poses])
    if len(obj_t):
        _check_stamps(source, C.TOPIC_OBJECT_POSES, obj_t, strict=False)
    obj = np.array([[[p.position.x, p.position.y, p.position.z, p.orientation.w,
                      p.orientation.x, p.orientation.y, p.orientation.z] for p in m.poses]
                    for m in poses], dtype=np.float64) if poses else np.zeros((0, 0, 7))
    arrays = (np.array([column(m, f) for m in js]) for f in ("position", "velocity", "effort"))
    pos, vel, eff = arrays
    if not np.isfinite(pos).all():
        raise LogError(f"{source}: {C.TOPIC_JOINT_STATES} positions are missing or not finite")
    return RobotLog(source=source, joint_names=names, t=t, position=pos, velocity=vel,
                    effort=eff, cmd_t=cmd_t, cmd_names=cmd_names, cmd_position=cmd_pos,
                    cmd_velocity=cmd_vel, object_t=obj_t, object_poses=obj, metadata=metadata)


def _check_stamps(source: str, topic: str, t: np.ndarray, strict: bool) -> None:
    if not np.isfinite(t).all():
        raise LogError(f"{source}: {topic} has stamps that are not finite")
    d = np.diff(t)
    bad = np.flatnonzero(d <= 0 if strict else d < 0)
    if len(bad):
        k = int(bad[0]) + 1
        raise LogError(f"{source}: {topic} stamps are not monotonic: message {k} at "
                       f"{t[k]:.9f} s follows {t[k - 1]:.9f} s ("
                       f"{'strictly increasing' if strict else 'non-decreasing'} stamps "
                       "required)")


# ------------------------------------------------------------------------------------ writing
def encode_log(t: np.ndarray, joint_names: Sequence[str], position: np.ndarray,
               velocity: np.ndarray, effort: np.ndarray, cmd_t: np.ndarray,
               cmd_names: Sequence[str], cmd_position: np.ndarray, cmd_velocity: np.ndarray,
               object_t: np.ndarray | None = None, object_poses: np.ndarray | None = None,
               metadata: dict[str, Any] | None = None, in_stamp_order: bool = True) -> bytes:
    """The MCAP bytes (ros2 profile, CDR, ``ros2 bag`` schemas) of a robot log with the topics
    of the module table. Deterministic: same arrays, same bytes (log time = header stamp).

    ``in_stamp_order=False`` writes each topic's messages in array order instead (as a
    recorder writes them on arrival, whatever their stamps say)."""
    from mcap.writer import CompressionType
    from mcap_ros2.writer import Writer

    from clawgym_ros.dataset.msgdefs import message_definition

    buf = io.BytesIO()
    writer = Writer(buf, chunk_size=4 * 1024 * 1024, compression=CompressionType.ZSTD)
    schemas = {t_: writer.register_msgdef(t_, message_definition(t_))
               for t_ in (T_JOINT_STATE, T_TRAJECTORY, T_POSE_ARRAY)}

    def stamp(sec: float) -> dict[str, int]:
        ns = int(round(sec * 1e9))
        return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}

    events: list[tuple[int, int, int]] = [(int(round(s * 1e9)), 0, i) for i, s in enumerate(t)]
    events += [(int(round(s * 1e9)), 1, i) for i, s in enumerate(cmd_t)]
    if object_t is not None and object_poses is not None:
        events += [(int(round(s * 1e9)), 2, i) for i, s in enumerate(object_t)]
    seq = 0
    for ns, kind, i in sorted(events) if in_stamp_order else events:
        if kind == 0:
            msg = {"header": {"stamp": stamp(t[i]), "frame_id": ""}, "name": list(joint_names),
                   "position": position[i].tolist(), "velocity": velocity[i].tolist(),
                   "effort": effort[i].tolist()}
            topic, schema = C.TOPIC_JOINT_STATES, schemas[T_JOINT_STATE]
        elif kind == 1:
            msg = {"header": {"stamp": stamp(cmd_t[i]), "frame_id": ""},
                   "joint_names": list(cmd_names),
                   "points": [{"positions": cmd_position[i].tolist(),
                               "velocities": cmd_velocity[i].tolist(), "accelerations": [],
                               "effort": [], "time_from_start": {"sec": 0, "nanosec": 0}}]}
            topic, schema = C.TOPIC_JOINT_TRAJECTORY, schemas[T_TRAJECTORY]
        else:
            msg = {"header": {"stamp": stamp(object_t[i]), "frame_id": C.FRAME_WORLD},
                   "poses": [{"position": {"x": p[0], "y": p[1], "z": p[2]},
                              "orientation": {"w": p[3], "x": p[4], "y": p[5], "z": p[6]}}
                             for p in object_poses[i].tolist()]}
            topic, schema = C.TOPIC_OBJECT_POSES, schemas[T_POSE_ARRAY]
        writer.write_message(topic, schema, msg, log_time=ns, publish_time=ns, sequence=seq)
        seq += 1
    if metadata:
        writer.add_metadata(METADATA_NAME, {k: json.dumps(v, sort_keys=True)
                                                    for k, v in sorted(metadata.items())})
    writer.finish()
    return buf.getvalue()
