"""Send the latest request of a settings service, one call in flight, re-sent periodically.

The lighting and dynamics perturbation nodes push settings to the simulator
(``sim/set_lighting``, ``sim/set_dynamics``). Only the newest settings matter, a call must not
overlap the previous one, and unchanged settings are re-sent every ``refresh_s`` because a
simulator reset restores its defaults. :class:`LatestRequestSender` is that piece; the nodes
call :meth:`LatestRequestSender.set` when the settings change and :meth:`LatestRequestSender.send`
from a timer.
"""

from __future__ import annotations

import time
from typing import Any

from rclpy.node import Node


class LatestRequestSender:
    """Client of one settings service that sends only the newest request.

    Args:
        node: the node that owns the client.
        srv_type: the service type (e.g. ``SetLighting``).
        srv_name: the service name.
        refresh_s: re-send the current request after this long (s); 0 = never.
    """

    def __init__(self, node: Node, srv_type: Any, srv_name: str, refresh_s: float) -> None:
        self.node = node
        self.client = node.create_client(srv_type, srv_name)
        self.refresh_s = float(refresh_s)
        self.current: Any = None
        self._pending: Any = None
        self._in_flight: Any = None
        self._sent_at = -1e18

    def set(self, request: Any) -> None:
        """Make ``request`` the current one (None = nothing to send) and queue it."""
        self.current = self._pending = request

    def send(self) -> None:
        """Send the queued request (or the current one when ``refresh_s`` has passed), unless a
        call is still in flight or the service is not ready (then a throttled warning)."""
        now = time.monotonic()
        if self._pending is None and self.current is not None and self.refresh_s > 0 and \
                now - self._sent_at >= self.refresh_s:
            self._pending = self.current
        if self._pending is None or (self._in_flight is not None and not self._in_flight.done()):
            return
        if not self.client.service_is_ready():
            self.node.get_logger().warning(f"waiting for {self.client.srv_name}",
                                           throttle_duration_sec=5.0)
            return
        request, self._pending = self._pending, None
        self._sent_at = now
        self._in_flight = self.client.call_async(request)
        self._in_flight.add_done_callback(self._done)

    def _done(self, future: Any) -> None:
        result = future.result()
        if result is not None and not result.success:
            self.node.get_logger().error(f"{self.client.srv_name} failed: {result.message}")
