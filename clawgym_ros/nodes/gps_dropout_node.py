"""gps_dropout_node: interposes on a NavSatFix topic and applies GPS outages and jitter.

``gps/fix_raw -> gps/fix`` by default (parameters ``fix_in`` / ``fix_out``, remappable), with
sensor-data QoS. Outages are driven by the header stamps through
:class:`clawgym_ros.perturbations.GpsDropout`: in ``drop`` mode no fix is republished during an
outage; in ``degraded`` mode a fix with status STATUS_NO_FIX is. ``perturbation_state``
(latched) is republished when an outage starts or ends (``active`` true while it lasts).
Serves ``set_perturbation``.

Lockstep (``hold``, with ``reliable``): every input fix gives an output fix of the same stamp,
exactly what :class:`~clawgym_ros.perturbations.wrappers.GpsDropoutWrapper` shows the policy:
during an
outage (dropped or degraded) the last fix delivered this episode (the raw one before any), with
status STATUS_NO_FIX. So a lockstep policy_node never waits on a wall-clock hold for a stamp
that has no fix (and cannot act before a late one arrives).
"""

from __future__ import annotations

import dataclasses
import sys

from rclpy.node import Node
from sensor_msgs.msg import NavSatFix, NavSatStatus

from clawgym_ros import constants as C
from clawgym_ros.perturbations.gps import STATUS_NO_FIX, GpsDropout, GpsFix
from clawgym_ros.ros_io.convert import time_seconds
from clawgym_ros.ros_io.params import declare_config
from clawgym_ros.ros_io.perturbation import PerturbationHost
from clawgym_ros.ros_io.qos import interposer_qos, reliable_field
from clawgym_ros.ros_io.spin import spin


@dataclasses.dataclass(frozen=True)
class GpsTopics:
    """Input and output topics of the interposer."""

    fix_in: str = dataclasses.field(default=C.TOPIC_GPS_RAW, metadata={"help": "raw NavSatFix"})
    fix_out: str = dataclasses.field(default=C.TOPIC_GPS, metadata={"help": "perturbed fixes"})
    reliable: bool = reliable_field()
    hold: bool = dataclasses.field(default=False, metadata={
        "help": "lockstep: for a fix the outage drops or degrades, republish the last fix "
                "delivered this episode (status NO_FIX), as the Gymnasium wrapper shows it"})


class GpsDropoutNode(Node):
    """Thin node: NavSatFix -> :class:`GpsFix` -> :class:`GpsDropout` -> NavSatFix."""

    def __init__(self) -> None:
        super().__init__(C.NODE_GPS_DROPOUT)
        self.host = PerturbationHost(self, GpsDropout, on_configure=self._on_episode)
        topics = declare_config(self, GpsTopics)
        self._lockstep = topics.hold
        # Lockstep: the last fix delivered this episode (lat, lon, alt).
        self._held: tuple[float, float, float] | None = None
        qos = interposer_qos(topics.reliable)
        self.pub = self.create_publisher(NavSatFix, topics.fix_out, qos)
        self.create_subscription(NavSatFix, topics.fix_in, self._on_fix, qos)

    def _on_episode(self, core: GpsDropout) -> None:
        self._held = None

    def _on_fix(self, msg: NavSatFix) -> None:
        fix = GpsFix(msg.latitude, msg.longitude, msg.altitude, time_seconds(msg.header.stamp),
                     msg.status.status)
        out = self.host.core.apply(fix)
        if self._lockstep:
            if out is None or out.status == STATUS_NO_FIX:
                held = self._held or (fix.latitude, fix.longitude, fix.altitude)
                msg.latitude, msg.longitude, msg.altitude = held
                msg.status.status = NavSatStatus.STATUS_NO_FIX
                msg.position_covariance_type = NavSatFix.COVARIANCE_TYPE_UNKNOWN
            else:
                self._held = (out.latitude, out.longitude, out.altitude)
                msg.latitude, msg.longitude, msg.altitude = self._held
                msg.status.status = out.status
            self.pub.publish(msg)
            self.host.publish()
            return
        if out is not None:
            msg.latitude, msg.longitude, msg.altitude = out.latitude, out.longitude, out.altitude
            msg.status.status = out.status
            if out.status == STATUS_NO_FIX:
                msg.status.status = NavSatStatus.STATUS_NO_FIX
                msg.position_covariance_type = NavSatFix.COVARIANCE_TYPE_UNKNOWN
            self.pub.publish(msg)
        self.host.publish()


def main(args: list[str] | None = None) -> int:
    """Console script ``gps_dropout_node``."""
    return spin(GpsDropoutNode, args)


if __name__ == "__main__":
    sys.exit(main())
