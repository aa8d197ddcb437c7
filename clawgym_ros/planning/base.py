"""The planner interface shared by the embedded OMPL planner and the moveit_py backend, and
the registry that picks one by name (like :data:`clawgym_ros.sim.backend.BACKENDS`)."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping

from clawgym_ros import constants as C
from clawgym_ros import plugins
from clawgym_ros.planning.types import PlanRequest, PlanResult

#: Links allowed to touch a grasped object (MoveIt's touch_links).
GRIPPER_TOUCH_LINKS: tuple[str, ...] = (
    "gripper_hand", "gripper_left_finger", "gripper_right_finger")


class Planner(abc.ABC):
    """Plans time-parameterized arm motions (MoveIt's planning component, simplified)."""

    name: str = "abstract"

    @abc.abstractmethod
    def set_joint_positions(self, positions: Mapping[str, float]) -> None:
        """Update the current robot state (e.g. from joint_states); unknown names ignored."""

    @abc.abstractmethod
    def plan(self, request: PlanRequest) -> PlanResult:
        """Plan for ``request``; failures come back as a result with a reason, not raised."""

    @abc.abstractmethod
    def attach_object(self, body: str, touch_links: Iterable[str] = GRIPPER_TOUCH_LINKS) -> None:
        """Attach a scene object to the tool frame at its current relative pose."""

    @abc.abstractmethod
    def detach_object(self) -> None:
        """Release the attached object."""

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints of the arm group, in trajectory column order."""
        return C.ARM_JOINTS


#: backend name -> "module:class", imported lazily (moveit needs a ROS workstation).
BACKENDS: dict[str, str] = {
    "ompl": "clawgym_ros.planning.ompl_planner:OmplPlanner",
    "moveit": "clawgym_ros.ros_io.moveit_planner:MoveItPlanner",
}


def planner_class(name: str) -> type[Planner]:
    """The planner class registered under ``name``.

    Raises:
        ConfigError: unknown name.
    """
    return plugins.named_class(BACKENDS, name)
