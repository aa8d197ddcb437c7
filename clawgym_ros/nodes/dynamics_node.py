"""dynamics_node: drives the simulator's dynamics through ``sim/set_dynamics``.

On start-up and after every ``set_perturbation`` call it sends the episode's
:class:`~clawgym_ros.sim.backend.DynamicsSettings` from
:class:`clawgym_ros.perturbations.Dynamics` (a disabled perturbation restores the defaults),
retrying until the simulator's service answers, and re-sends them every ``refresh_s`` because
a simulator reset restores its defaults. Serves ``set_perturbation`` (an empty family
starts the next episode: new draws); publishes ``perturbation_state`` (latched).
"""

from __future__ import annotations

import dataclasses
import sys

from rclpy.node import Node

from clawgym_interfaces.srv import SetDynamics
from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.perturbations.dynamics import Dynamics
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.perturbation import PerturbationHost
from clawgym_ros.ros_io.request_sender import LatestRequestSender
from clawgym_ros.ros_io.sim_services import dynamics_request
from clawgym_ros.ros_io.spin import spin

RETRY_S = 0.5


@dataclasses.dataclass(frozen=True)
class DynamicsNodeOptions:
    """How often unchanged settings are re-sent."""

    refresh_s: float = dataclasses.field(
        default=1.0, metadata={"help": "re-send the settings after this long, s "
                                       "(a simulator reset restores its defaults); 0 = never"})

    def __post_init__(self) -> None:
        check_range("refresh_s", self.refresh_s, 0.0, 3600.0)


class DynamicsNode(Node):
    """Thin node: :class:`Dynamics` -> SetDynamics request."""

    def __init__(self) -> None:
        super().__init__(C.NODE_DYNAMICS)
        self.sender = LatestRequestSender(self, SetDynamics, C.SRV_SET_DYNAMICS,
                                          declare_config(self, DynamicsNodeOptions).refresh_s)
        self.host = PerturbationHost(self, Dynamics, on_configure=self._on_configure)
        self._on_configure(self.host.core)
        self.timer = self.create_timer(RETRY_S, self.sender.send)

    def _on_configure(self, core: Dynamics) -> None:
        self.sender.set(dynamics_request(core.settings() if core.enabled else None))
        self.sender.send()


def main(args: list[str] | None = None) -> int:
    """Console script ``dynamics_node``."""
    return spin(DynamicsNode, args)


if __name__ == "__main__":
    sys.exit(main())
