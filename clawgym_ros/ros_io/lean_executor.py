"""A lean single-threaded executor for the lockstep hot loop (sim_node, policy_node, the
evaluator's driver).

rclpy's Python ``SingleThreadedExecutor`` rebuilds its whole wait set in Python for every
callback it runs (entity filters, callback-group checks, an ``ExitStack`` per entity, a new
``WaitSet``, a generator and a ``Task`` per callback): measured ~1-2 ms of CPU per lockstep
control step per process here, more than the work itself. :class:`LeanExecutor` keeps one
wait set and the entity lists between calls (rebuilt only when a node wakes the executor,
which rclpy does on every entity creation and destruction), takes every ready entity after one
wait, and calls plain callbacks directly.

Semantics kept: subscriptions (message-only or with ``MessageInfo``), services (a coroutine
callback runs as a task until it returns its response), client responses (the pending
future gets its result; done callbacks run at once), timers, guard conditions, tasks made by
``create_task``, waitables (QoS event handlers: their ``execute`` runs as a task),
``spin_until_future_complete`` and SIGINT/shutdown wake-ups. Not kept: callback groups (one
thread runs everything in order, so mutual exclusion holds anyway).
"""

from __future__ import annotations

import inspect
from typing import Any

from rclpy.executors import Executor, NumberOfEntities, TimeoutObject
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.subscription import Subscription
from rclpy.task import Task

#: Most messages one ready subscription delivers per wake-up (the deepest lockstep QoS).
DRAIN_MAX = 64


class LeanExecutor(Executor):
    """Single-threaded executor with a persistent wait set (see the module docstring).

    Args:
        context: the rclpy context (None = the default one).
    """

    def __init__(self, *, context: Any = None) -> None:
        super().__init__(context=context)
        self._dirty = True
        self._wait_set: Any = None
        self._subs: list[Any] = []
        self._services: list[Any] = []
        self._clients: list[Any] = []
        self._timers: list[Any] = []
        self._guards: list[Any] = []
        self._by_pointer: dict[tuple[str, int], Any] = {}
        self._waitables: list[Any] = []
        self._running: list[Task] = []

    # ------------------------------------------------------------------ bookkeeping
    def wake(self) -> None:
        """An entity was created or destroyed (or a task queued): rebuild, then wake up."""
        self._dirty = True
        super().wake()

    def _rebuild(self) -> None:
        self._dirty = False
        nodes = self.get_nodes()
        self._waitables = [w for n in nodes for w in n.waitables]
        extra = NumberOfEntities()
        for waitable in self._waitables:
            extra += waitable.get_num_entities()
        self._subs = [s for n in nodes for s in n.subscriptions]
        self._services = [s for n in nodes for s in n.services]
        self._clients = [c for n in nodes for c in n.clients]
        self._timers = [t for n in nodes for t in n.timers]
        own = [g for g in (self._guard, self._sigint_gc) if g is not None]
        self._guards = [g for n in nodes for g in n.guards] + own
        self._by_pointer = {}
        for kind, entities in (("subscription", self._subs), ("service", self._services),
                               ("client", self._clients), ("timer", self._timers),
                               ("guard_condition", self._guards)):
            for entity in entities:
                self._by_pointer[(kind, entity.handle.pointer)] = entity
        self._wait_set = _rclpy.WaitSet(
            len(self._subs) + extra.num_subscriptions,
            len(self._guards) + extra.num_guard_conditions,
            len(self._timers) + extra.num_timers, len(self._clients) + extra.num_clients,
            len(self._services) + extra.num_services, extra.num_events, self._context.handle)

    # ------------------------------------------------------------------ spinning
    def spin_once(self, timeout_sec: float | None = None) -> None:
        """Wait (``timeout_sec``; None = forever, 0 = poll) and run everything ready."""
        self._spin(timeout_sec)

    def spin_once_quiet(self, timeout_sec: float | None = None) -> None:
        """As :meth:`spin_once`, but subscriptions neither wake nor run: their messages stay
        queued in the middleware (up to their QoS depth) for a later :meth:`spin_once`. A
        driver waiting for a service answer takes the messages of the whole run at once
        instead of waking for each."""
        self._spin(timeout_sec, subscriptions=False)

    def _spin_once_until_future_complete(self, future: Any, timeout_sec: Any = None) -> None:
        self._spin(timeout_sec)

    def spin_once_until_future_complete(self, future: Any, timeout_sec: Any = None) -> None:
        future.add_done_callback(lambda _: self.wake())
        self._spin(timeout_sec)

    def _spin(self, timeout_sec: Any, subscriptions: bool = True) -> None:
        if isinstance(timeout_sec, TimeoutObject):
            timeout_sec = timeout_sec.timeout
        if self._is_shutdown or not self._context.ok():
            return
        if self._run_tasks():
            timeout_sec = 0.0
        if self._dirty:
            self._rebuild()
        ws = self._wait_set
        ws.clear_entities()
        for sub in self._subs if subscriptions else ():
            ws.add_subscription(sub.handle)
        for srv in self._services:
            ws.add_service(srv.handle)
        for cli in self._clients:
            ws.add_client(cli.handle)
        for tmr in self._timers:
            ws.add_timer(tmr.handle)
        for gc in self._guards:
            ws.add_guard_condition(gc.handle)
        for waitable in self._waitables:
            waitable.add_to_wait_set(ws)
        timeout_ns = -1 if timeout_sec is None or timeout_sec < 0 else int(timeout_sec * 1e9)
        ws.wait(timeout_ns)
        if self._is_shutdown or not self._context.ok():
            return
        ready = [(kind, pointer) for kind in ("timer", "subscription", "guard_condition",
                                              "client", "service")
                 for pointer in ws.get_ready_entities(kind)]
        for key in ready:
            entity = self._by_pointer.get(key)
            if entity is not None:
                self._execute(key[0], entity)
        for waitable in self._waitables:
            if waitable.is_ready(ws):
                self._start_task(waitable.execute(waitable.take_data()))
        self._run_tasks()

    def _execute(self, kind: str, entity: Any) -> None:
        if kind == "subscription":
            # Every queued message (at most DRAIN_MAX), in order: a reader that waited
            # (spin_once_quiet) takes a run's samples in one wake-up.
            message_only = entity._callback_type is Subscription.CallbackType.MessageOnly
            for _ in range(DRAIN_MAX):
                taken = entity.handle.take_message(entity.msg_type, entity.raw)
                if taken is None:
                    break
                if message_only:
                    entity.callback(taken[0])
                else:
                    entity.callback(*taken)
        elif kind == "service":
            request, header = entity.handle.service_take_request(entity.srv_type.Request)
            if header is None:
                return
            response = entity.callback(request, entity.srv_type.Response())
            if inspect.iscoroutine(response):
                self._start_task(self._respond_later(entity, response, header))
            else:
                entity.send_response(response, header)
        elif kind == "client":
            header, response = entity.handle.take_response(entity.srv_type.Response)
            if header is None:
                return
            try:
                future = entity.get_pending_request(header.request_id.sequence_number)
            except KeyError:
                return        # cancelled (remove_pending_request)
            future.set_result(response)
        elif kind == "timer":
            if entity.handle.is_timer_ready():
                entity.handle.call_timer()
                if entity.callback is not None:
                    self._maybe_task(entity.callback())
        elif kind == "guard_condition":
            if entity.callback is not None:
                self._maybe_task(entity.callback())

    @staticmethod
    async def _respond_later(service: Any, coroutine: Any, header: Any) -> None:
        service.send_response(await coroutine, header)

    def _maybe_task(self, result: Any) -> None:
        if inspect.iscoroutine(result):
            self._start_task(result)

    def _start_task(self, coroutine: Any) -> None:
        async def run() -> Any:
            return await coroutine

        task = Task(run)
        self._running.append(task)
        task()

    def _run_tasks(self) -> bool:
        """Resume running coroutines and queued tasks; True when one finished or was queued
        (so the next wait only polls)."""
        with self._tasks_lock:
            queued = [t for t, _, _ in self._tasks]
            self._tasks = []
        self._running.extend(queued)
        if not self._running:
            return False
        progressed = bool(queued)
        for task in list(self._running):
            if not task.done():
                task()
            if task.done():
                self._running.remove(task)
                progressed = True
                if task.exception() is not None:
                    raise task.exception()
        return progressed


def executor_for(node: Any, context: Any = None) -> LeanExecutor:
    """A :class:`LeanExecutor` with ``node`` added."""
    executor = LeanExecutor(context=context)
    executor.add_node(node)
    return executor
