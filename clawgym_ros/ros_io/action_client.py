"""An rclpy ActionClient safe to call from a thread other than the one spinning it.

rclpy's ActionClient registers a request's sequence number only after the request went out
(``send_goal_async``, ``_get_result_async``, ``_cancel_goal_async``). When another thread
spins the executor, a fast server's response can be taken and handled in between; the client
logs "Ignoring unexpected goal response. There may be more than one action server" and the
future never completes (ros2/rclpy#1123; fixed upstream by a lock in ros2/rclpy#1308 and its
backports, absent from the rclpy 7.1.x wheels of Jazzy here). The coordinator sends its goals
from its loop thread while the main thread spins: one of three train goals of an ablation
seed was lost this way, and the loop stopped with "train did not answer the goal within
120 s" although the trainer had accepted it.

Here sending and registering happen under one lock, and responses are taken under the same
lock, so a response is only ever taken once its request is registered.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient


class ThreadSafeActionClient(ActionClient):
    """:class:`rclpy.action.ActionClient` whose requests register before any response is
    taken (same constructor, same API)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before super().__init__: the executor may poll the client as soon as it exists.
        self._request_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def take_data(self):
        with self._request_lock:
            return super().take_data()

    def send_goal_async(self, *args: Any, **kwargs: Any):
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _get_result_async(self, goal_handle):
        with self._request_lock:
            return super()._get_result_async(goal_handle)

    def _cancel_goal_async(self, goal_handle):
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)
