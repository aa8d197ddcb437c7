"""Generate the SRDF's disabled collision pairs by sampling, as MoveIt's setup assistant does.

Run once (``python -m clawgym_ros.planning.srdf``) after the URDF changes; the result is
written to ``config/moveit/claw_arm.srdf`` and checked against the URDF by a test.

Reasons, as in MoveIt: ``Adjacent`` (parent and child links), ``Default`` (in collision at the
home state, e.g. overlapping shells), ``Never`` (never in collision in any of the samples).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import data_root
from clawgym_ros.planning.moveit_config import DEFAULT_MOVEIT_DIR
from clawgym_ros.sim.collision import CollisionChecker
from clawgym_ros.sim.world import model_from_xml

URDF_XACRO = data_root() / "urdf" / "claw_arm.urdf.xacro"

#: Named states (arm), written into the SRDF. home = the URDF's ros2_control initial values.
ARM_STATES: dict[str, tuple[float, ...]] = {
    "home": (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785),
    "ready": (0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785),
}
GRIPPER_STATES: dict[str, tuple[float, ...]] = {"open": (0.04, 0.04), "closed": (0.0, 0.0)}
END_EFFECTOR = ("claw", "gripper_hand", C.GRIPPER_GROUP, C.ARM_GROUP)  # name, link, group, parent


def urdf_text(xacro_path: str | Path = URDF_XACRO) -> str:
    """The robot URDF expanded from its xacro (needs the PyPI ``xacro`` package)."""
    import xacro

    return xacro.process_file(str(xacro_path)).toxml()


def robot_model(xacro_path: str | Path = URDF_XACRO) -> Any:
    """The robot alone as a MuJoCo model (one body per URDF link, no fusing)."""
    text = urdf_text(xacro_path)
    head = text.index(">", text.index("<robot")) + 1
    text = (text[:head] + '<mujoco><compiler fusestatic="false" discardvisual="true" '
            'balanceinertia="true"/></mujoco>' + text[head:])
    return model_from_xml(text)


def link_names(urdf: str) -> list[str]:
    """Link names of a URDF text."""
    import xml.etree.ElementTree as ET

    return [link.get("name", "") for link in ET.fromstring(urdf).findall("link")]


def sample_disabled_pairs(
    model: Any, samples: int = 20000, seed: int = 0,
    home: Mapping[str, float] | None = None, padding: float = 0.01,
) -> dict[tuple[str, str], str]:
    """Robot link pairs that need no collision checking, with their reason.

    Args:
        model: the robot model (one body per link).
        samples: random configurations (arm and gripper joints within limits).
        seed: generator seed.
        home: joint values of the home state (default: :data:`ARM_STATES` home).
        padding: the planner's safety distance, used for the ``Default`` pairs.

    Returns:
        ``{(link1, link2): reason}`` with link1 < link2.
    """
    joints = (*C.ARM_JOINTS, *C.GRIPPER_JOINTS)
    checker = CollisionChecker(model, joints, padding=0.0)
    geom_bodies = sorted({int(b) for b in model.geom_bodyid if b > 0})
    names = {b: checker.body_name(b) for b in geom_bodies}
    pairs = {tuple(sorted((names[a], names[b]))) for i, a in enumerate(geom_bodies)
             for b in geom_bodies[i + 1:]}
    reasons: dict[tuple[str, str], str] = {}
    for b in geom_bodies:
        parent = int(model.body_parentid[b])
        # Adjacent links in the URDF sense: skip bodies without geometry (fixed frames).
        while parent > 0 and parent not in names:
            parent = int(model.body_parentid[parent])
        if parent in names:
            reasons[tuple(sorted((names[b], names[parent])))] = "Adjacent"
    # Default: touching (within the planning padding) at home with the gripper open or closed,
    # e.g. the finger pads meet when closed.
    padded = CollisionChecker(model, joints, padding=padding)
    for grip in GRIPPER_STATES.values():
        home_q = np.array([*ARM_STATES["home"], *grip])
        if home:
            home_q = np.array([home.get(j, v) for j, v in zip(joints, home_q, strict=True)])
        for c in padded.contacts(home_q):
            reasons.setdefault(tuple(sorted((c.body1, c.body2))), "Default")
    rng = np.random.default_rng(seed)
    seen: set[tuple[str, str]] = set()
    for _ in range(samples):
        q = rng.uniform(checker.lower, checker.upper)
        for c in checker.contacts(q):
            seen.add(tuple(sorted((c.body1, c.body2))))
    for pair in pairs - seen:
        reasons.setdefault(pair, "Never")
    return reasons


def srdf_text(
    disabled: Mapping[tuple[str, str], str], robot_name: str = "claw_arm",
    arm_states: Mapping[str, Sequence[float]] = ARM_STATES,
    gripper_states: Mapping[str, Sequence[float]] = GRIPPER_STATES,
) -> str:
    """The SRDF document for the claw arm."""
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<!-- Semantic description of claw_arm for MoveIt and the embedded planner.",
        "     disable_collisions generated by `python -m clawgym_ros.planning.srdf`. -->",
        f'<robot name="{robot_name}">',
        f'  <group name="{C.ARM_GROUP}">',
        *[f'    <joint name="{j}"/>' for j in C.ARM_JOINTS],
        "  </group>",
        f'  <group name="{C.GRIPPER_GROUP}">',
        *[f'    <joint name="{j}"/>' for j in C.GRIPPER_JOINTS],
        "  </group>",
    ]
    for group, joints, states in ((C.ARM_GROUP, C.ARM_JOINTS, arm_states),
                                  (C.GRIPPER_GROUP, C.GRIPPER_JOINTS, gripper_states)):
        for name, values in states.items():
            lines.append(f'  <group_state name="{name}" group="{group}">')
            lines += [f'    <joint name="{j}" value="{v:g}"/>'
                      for j, v in zip(joints, values, strict=True)]
            lines.append("  </group_state>")
    ee, link, group, parent = END_EFFECTOR
    lines.append(f'  <end_effector name="{ee}" parent_link="{link}" group="{group}" '
                 f'parent_group="{parent}"/>')
    lines.append(f'  <virtual_joint name="virtual_joint" type="fixed" '
                 f'parent_frame="{C.FRAME_WORLD}" child_link="{C.FRAME_BASE}"/>')
    for (a, b), reason in sorted(disabled.items()):
        lines.append(f'  <disable_collisions link1="{a}" link2="{b}" reason="{reason}"/>')
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``config/moveit/claw_arm.srdf`` from the URDF."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(DEFAULT_MOVEIT_DIR / "claw_arm.srdf"))
    args = parser.parse_args(argv)
    disabled = sample_disabled_pairs(robot_model(), args.samples, args.seed)
    Path(args.out).write_text(srdf_text(disabled))
    print(f"wrote {args.out}: {len(disabled)} disabled pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
