"""lighting_node: drives the simulator's lighting through ``sim/set_lighting``.

A timer at ``update_hz`` evaluates :class:`clawgym_ros.perturbations.Lighting` at the node's
clock (simulation time with ``use_sim_time``) and calls ``sim/set_lighting`` (SetLighting)
whenever the settings change (sudden changes, flicker), and again every ``refresh_s`` because
a simulator reset restores its defaults; a disabled perturbation restores the defaults.
Simulation time going backwards (a simulator reset) starts the next episode. The MuJoCo
sim_node and the Gazebo backend serve the same service. Serves ``set_perturbation``;
publishes ``perturbation_state`` (latched).
"""

from __future__ import annotations

import dataclasses
import sys

from rclpy.node import Node

from clawgym_interfaces.srv import SetLighting
from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.perturbations.lighting import Lighting
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.perturbation import PerturbationHost
from clawgym_ros.ros_io.request_sender import LatestRequestSender
from clawgym_ros.ros_io.sim_services import lighting_request
from clawgym_ros.ros_io.spin import spin


@dataclasses.dataclass(frozen=True)
class LightingNodeOptions:
    """How often the lighting is re-evaluated and re-sent."""

    update_hz: float = dataclasses.field(
        default=20.0, metadata={"help": "lighting evaluations per second, [0.1, 1000]"})
    refresh_s: float = dataclasses.field(
        default=1.0, metadata={"help": "re-send unchanged settings after this long, s "
                                       "(a simulator reset restores its defaults); 0 = never"})

    def __post_init__(self) -> None:
        check_range("update_hz", self.update_hz, 0.1, 1000.0)
        check_range("refresh_s", self.refresh_s, 0.0, 3600.0)


class LightingNode(Node):
    """Thin node: clock -> :class:`Lighting` -> SetLighting request."""

    def __init__(self) -> None:
        super().__init__(C.NODE_LIGHTING)
        options = declare_config(self, LightingNodeOptions)
        self.sender = LatestRequestSender(self, SetLighting, C.SRV_SET_LIGHTING,
                                          options.refresh_s)
        self._last_t: float | None = None
        self.host = PerturbationHost(self, Lighting, on_configure=self._on_configure)
        self.timer = self.create_timer(1.0 / options.update_hz, self._tick)
        self._on_configure(self.host.core)

    def _on_configure(self, core: Lighting) -> None:
        # Reconfiguring forgets the last settings, so the next tick pushes the new ones.
        self.sender.set(None if core.enabled else lighting_request(None))

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _tick(self) -> None:
        core: Lighting = self.host.core
        t = self._now()
        if self._last_t is not None and t < self._last_t:
            core.reset()
            self.host.configured()
        self._last_t = t
        if core.enabled:
            settings = core.update(t)
            if settings is not None:
                self.sender.set(lighting_request(settings))
        self.host.publish()
        self.sender.send()


def main(args: list[str] | None = None) -> int:
    """Console script ``lighting_node``."""
    return spin(LightingNode, args)


if __name__ == "__main__":
    sys.exit(main())
