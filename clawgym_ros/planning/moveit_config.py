"""Read the MoveIt configuration in ``config/moveit/`` (SRDF + YAML) into plain dataclasses.

The same files serve moveit_py on a workstation and the embedded OMPL planner here, so the two
backends plan with the same groups, named states, disabled collision pairs, joint limits and
planner configurations. Pure: no rclpy, no MoveIt.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import data_root, load_yaml
from clawgym_ros.errors import ConfigError

#: config/moveit inside the source tree (an installed package has it under share/).
DEFAULT_MOVEIT_DIR = data_root() / "config" / "moveit"


@dataclasses.dataclass(frozen=True)
class JointLimit:
    """Velocity and acceleration limit of one joint (rad/s, rad/s^2 or m/s, m/s^2)."""

    max_velocity: float
    max_acceleration: float


@dataclasses.dataclass(frozen=True)
class PlannerConfig:
    """One entry of ``planner_configs`` in ompl_planning.yaml."""

    name: str
    type: str  # e.g. "geometric::RRTConnect"
    params: Mapping[str, float]

    @property
    def short_type(self) -> str:
        """The OMPL class name, e.g. ``RRTConnect``."""
        return self.type.split("::")[-1]


@dataclasses.dataclass(frozen=True)
class Srdf:
    """What the embedded planner needs from the SRDF."""

    robot_name: str
    groups: Mapping[str, tuple[str, ...]]          # group -> joint names
    group_states: Mapping[str, Mapping[str, Mapping[str, float]]]  # group -> state -> values
    end_effectors: Mapping[str, tuple[str, str]]   # name -> (parent_link, group)
    disabled_collisions: frozenset[frozenset[str]]  # unordered link pairs
    disabled_reasons: Mapping[frozenset[str], str]

    @property
    def links(self) -> set[str]:
        """Every link named by a disabled collision pair or end effector."""
        out = {name for pair in self.disabled_collisions for name in pair}
        out |= {parent for parent, _ in self.end_effectors.values()}
        return out


@dataclasses.dataclass(frozen=True)
class MoveItConfig:
    """The MoveIt configuration of one robot."""

    srdf: Srdf
    joint_limits: Mapping[str, JointLimit]
    default_velocity_scaling: float
    default_acceleration_scaling: float
    planner_configs: Mapping[str, PlannerConfig]
    group_planners: Mapping[str, tuple[str, ...]]   # group -> planner config names
    default_planner: Mapping[str, str]              # group -> config name
    longest_valid_segment_fraction: float
    kinematics: Mapping[str, Mapping[str, Any]]
    directory: Path

    def group_joints(self, group: str) -> tuple[str, ...]:
        """Joint names of ``group``.

        Raises:
            ConfigError: unknown group.
        """
        if group not in self.srdf.groups:
            raise ConfigError("group", group, "one of " + ", ".join(sorted(self.srdf.groups)))
        return self.srdf.groups[group]

    def named_state(self, group: str, name: str) -> tuple[float, ...]:
        """Joint values of the SRDF group state ``name``, ordered like the group's joints.

        Raises:
            ConfigError: unknown group or state.
        """
        joints = self.group_joints(group)
        states = self.srdf.group_states.get(group, {})
        if name not in states:
            raise ConfigError("named_goal", name, "one of " + ", ".join(sorted(states)))
        return tuple(float(states[name][j]) for j in joints)

    def resolve_planner(self, group: str, planner_id: str = "") -> PlannerConfig:
        """The planner configuration for ``planner_id`` (config name or short type name).

        Args:
            group: planning group (its default is used for an empty ``planner_id``).
            planner_id: e.g. ``"RRTConnectkConfigDefault"``, ``"RRTstar"`` or ``""``.

        Raises:
            ConfigError: unknown planner id.
        """
        if not planner_id:
            planner_id = self.default_planner.get(group, "RRTConnectkConfigDefault")
        if planner_id in self.planner_configs:
            return self.planner_configs[planner_id]
        for cfg in self.planner_configs.values():
            if planner_id in (cfg.short_type, cfg.type):
                return cfg
        allowed = sorted(self.planner_configs) + sorted(
            {c.short_type for c in self.planner_configs.values()})
        raise ConfigError("planner_id", planner_id, "one of " + ", ".join(allowed))


def parse_srdf(text: str, source: str = "srdf") -> Srdf:
    """Parse SRDF XML text.

    Raises:
        ConfigError: malformed XML or a group state with unknown joints.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise ConfigError("srdf", source, f"well-formed XML ({err})") from None
    groups: dict[str, tuple[str, ...]] = {}
    for group in root.findall("group"):
        joints = [j.get("name", "") for j in group.findall("joint")]
        groups[group.get("name", "")] = tuple(joints)
    states: dict[str, dict[str, dict[str, float]]] = {}
    for state in root.findall("group_state"):
        group = state.get("group", "")
        values = {j.get("name", ""): float(j.get("value", "nan")) for j in state.findall("joint")}
        missing = set(groups.get(group, ())) - set(values)
        if group not in groups or missing:
            raise ConfigError(f"group_state {state.get('name')}", sorted(missing) or group,
                              "a value for every joint of a known group", source)
        states.setdefault(group, {})[state.get("name", "")] = values
    effectors = {
        ee.get("name", ""): (ee.get("parent_link", ""), ee.get("group", ""))
        for ee in root.findall("end_effector")
    }
    disabled: dict[frozenset[str], str] = {}
    for dc in root.findall("disable_collisions"):
        pair = frozenset((dc.get("link1", ""), dc.get("link2", "")))
        disabled[pair] = dc.get("reason", "")
    return Srdf(
        robot_name=root.get("name", ""), groups=groups, group_states=states,
        end_effectors=effectors, disabled_collisions=frozenset(disabled),
        disabled_reasons=disabled,
    )


def load_moveit_config(directory: str | Path | None = None) -> MoveItConfig:
    """Load ``claw_arm.srdf``, joint_limits.yaml, ompl_planning.yaml and kinematics.yaml.

    Raises:
        ConfigError: a missing file or an invalid value, naming the file.
    """
    directory = Path(directory) if directory else DEFAULT_MOVEIT_DIR
    srdf_path = directory / "claw_arm.srdf"
    try:
        srdf = parse_srdf(srdf_path.read_text(), str(srdf_path))
    except FileNotFoundError:
        raise ConfigError("path", str(srdf_path), "an existing SRDF file") from None

    limits_path = directory / "joint_limits.yaml"
    limits_doc = load_yaml(limits_path) or {}
    limits: dict[str, JointLimit] = {}
    for joint, entry in (limits_doc.get("joint_limits") or {}).items():
        vel = float(entry.get("max_velocity", 0.0)) if entry.get("has_velocity_limits") else 0.0
        acc = (float(entry.get("max_acceleration", 0.0))
               if entry.get("has_acceleration_limits") else 0.0)
        if vel <= 0.0 or acc <= 0.0:
            raise ConfigError(f"joint_limits.{joint}", entry,
                              "positive max_velocity and max_acceleration", str(limits_path))
        limits[joint] = JointLimit(vel, acc)

    ompl_path = directory / "ompl_planning.yaml"
    ompl_doc = load_yaml(ompl_path) or {}
    configs: dict[str, PlannerConfig] = {}
    for name, entry in (ompl_doc.get("planner_configs") or {}).items():
        params = {k: v for k, v in entry.items() if k != "type"}
        configs[name] = PlannerConfig(name, str(entry.get("type", "")), params)
    group_planners: dict[str, tuple[str, ...]] = {}
    defaults: dict[str, str] = {}
    segment_fraction = 0.005
    for group in srdf.groups:
        entry = ompl_doc.get(group) or {}
        names = tuple(entry.get("planner_configs", ()))
        unknown = [n for n in names if n not in configs]
        if unknown:
            raise ConfigError(f"{group}.planner_configs", unknown[0],
                              "a name under planner_configs", str(ompl_path))
        group_planners[group] = names
        if "default_planner_config" in entry:
            defaults[group] = entry["default_planner_config"]
        if group == C.ARM_GROUP:
            segment_fraction = float(entry.get("longest_valid_segment_fraction", 0.005))

    kin_doc = load_yaml(directory / "kinematics.yaml") or {}
    return MoveItConfig(
        srdf=srdf, joint_limits=limits,
        default_velocity_scaling=float(limits_doc.get("default_velocity_scaling_factor", 1.0)),
        default_acceleration_scaling=float(
            limits_doc.get("default_acceleration_scaling_factor", 1.0)),
        planner_configs=configs, group_planners=group_planners, default_planner=defaults,
        longest_valid_segment_fraction=segment_fraction, kinematics=kin_doc,
        directory=directory,
    )
