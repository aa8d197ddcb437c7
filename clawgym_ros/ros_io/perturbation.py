"""ROS plumbing shared by the perturbation nodes: parameters, SetPerturbation, latched state.

(Conversions of lighting / dynamics settings to the simulator's service requests live in
:mod:`clawgym_ros.ros_io.sim_services`, shared with sim_node.)

A node owns one :class:`PerturbationHost`; the host declares the core's config as parameters,
builds the core, serves ``set_perturbation`` and publishes ``perturbation_state`` (latched)
whenever the active state changes. The node itself only converts its messages.

SetPerturbation semantics: a family (the node's, or 'none') reconfigures from the declared
parameters plus the request's intensity, schedule, seed and parameter overrides, and begins
episode 0; an empty family keeps the configuration and begins the next episode with episode
seed ``request.seed`` (the ROS counterpart of ``env.reset(seed=...)`` on the wrappers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rclpy.node import Node

from clawgym_interfaces.msg import PerturbationParameter, PerturbationState
from clawgym_interfaces.srv import SetPerturbation
from clawgym_ros import constants as C
from clawgym_ros.config import from_dict
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations.base import Perturbation
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.qos import LATCHED_QOS
from clawgym_ros.ros_io.spin import spin  # noqa: F401 (the nodes' console-script body)


def state_msg(perturbation: Perturbation, stamp=None) -> PerturbationState:
    """The PerturbationState message of ``perturbation`` (its active parameters)."""
    cfg = perturbation.config
    msg = PerturbationState()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.family = cfg.family
    msg.intensity = float(cfg.intensity)
    msg.schedule = cfg.schedule
    msg.seed = int(cfg.seed)
    msg.active = bool(perturbation.active)
    msg.parameters = [PerturbationParameter(name=k, value=float(v))
                      for k, v in perturbation.state().items()]
    return msg


class PerturbationHost:
    """Parameters, SetPerturbation service and latched state of one perturbation node.

    Args:
        node: the node to attach to.
        core_cls: the perturbation class (its ``config_cls`` gives the parameters).
        on_configure: called with the core after every (re)configuration, e.g. to push
            settings to the simulator.
    """

    def __init__(self, node: Node, core_cls: type[Perturbation],
                 on_configure: Callable[[Perturbation], None] | None = None):
        self.node = node
        self.base_config = declare_config(node, core_cls.config_cls)
        self.core = core_cls(self.base_config)
        self.core.reset()  # begin episode 0, so that the next reset advances
        self._on_configure = on_configure
        self._last: tuple | None = None
        self.state_pub = node.create_publisher(PerturbationState, C.TOPIC_PERTURBATION_STATE,
                                               LATCHED_QOS)
        # Private name (``/<node>/set_perturbation``): several perturbation nodes share a
        # namespace, and each must be addressable on its own.
        self.service = node.create_service(SetPerturbation, f"~/{C.SRV_SET_PERTURBATION}",
                                           self._handle_set)
        self.publish(force=True)

    def configured(self) -> None:
        """Run the node's hook (after start-up, a SetPerturbation or a reset)."""
        if self._on_configure is not None:
            self._on_configure(self.core)

    def publish(self, force: bool = False) -> None:
        """Publish the state if it changed since the last publication (or ``force``)."""
        key = (self.core.active, self.core.episode, tuple(self.core.state().items()))
        if not force and key == self._last:
            return
        self._last = key
        self.state_pub.publish(state_msg(self.core, self.node.get_clock().now().to_msg()))

    def config_from_request(self, request: SetPerturbation.Request):
        """The config a SetPerturbation request asks for, on top of the declared parameters.

        Raises:
            ConfigError: a family other than the node's (or 'none'), unknown parameter names,
                or values out of range.
        """
        data = dataclasses.asdict(self.base_config)
        data.update(family=request.family, intensity=float(request.intensity),
                    schedule=request.schedule or self.base_config.schedule,
                    seed=int(request.seed))
        config = from_dict(type(self.base_config), data, source=C.SRV_SET_PERTURBATION)
        overrides = {p.name: p.value for p in request.parameters}
        return config.with_overrides(overrides)

    def _handle_set(self, request: SetPerturbation.Request,
                    response: SetPerturbation.Response) -> SetPerturbation.Response:
        try:
            if request.family == "":
                # An empty family keeps the configuration and starts the next episode with
                # episode seed ``request.seed``, as ``env.reset(seed=...)`` does in-process.
                self.core.reset(seed=int(request.seed))
                response.message = f"episode {self.core.episode} (seed {request.seed})"
            else:
                self.core.configure(self.config_from_request(request))
                self.core.reset()
                response.message = "configured"
            self.configured()
            response.success = True
        except ConfigError as err:
            response.success = False
            response.message = str(err)
        response.state = state_msg(self.core, self.node.get_clock().now().to_msg())
        self.publish(force=True)
        return response
