"""ROS domain reservation: two clawgym processes on one host never get the same domain id
(a shared domain lets one graph's goals reach another graph's action servers)."""

from __future__ import annotations

import subprocess
import sys

from clawgym_ros.procs import (
    DOMAIN_ID_FIRST_DERIVED,
    DOMAIN_ID_MAX,
    reserve_domain_id,
)
from test.conftest import ROOT

_HOLD = """
import sys
sys.path.insert(0, {root!r})
from clawgym_ros.procs import reserve_domain_id
held = reserve_domain_id({domain})
print(held.domain_id, flush=True)
sys.stdin.read()
"""


def _holder(domain: int | None) -> tuple[subprocess.Popen, int]:
    """A second process holding a reservation until its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD.format(root=str(ROOT), domain=domain)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def test_a_domain_held_by_another_process_is_skipped_and_freed_when_it_ends(monkeypatch):
    from clawgym_ros import procs

    with reserve_domain_id() as probe:   # a free id (this process's own one is taken)
        free = probe.domain_id
    proc, held = _holder(free)
    try:
        assert held == free
        assert procs._try_lock(free) is None   # the other process holds it
        # A process whose derived id is the held one moves on to the next free id.
        monkeypatch.setattr(procs, "domain_id_for", lambda pid=None: free)
        with reserve_domain_id() as second:
            assert second.domain_id != free
            assert DOMAIN_ID_FIRST_DERIVED <= second.domain_id <= DOMAIN_ID_MAX
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    # The holder is gone (the kernel dropped its lock): its id is free again.
    with reserve_domain_id() as again:
        assert again.domain_id == free


def test_reservations_in_one_process_are_distinct_until_released():
    first = reserve_domain_id()
    try:
        with reserve_domain_id() as second:
            assert second.domain_id != first.domain_id
    finally:
        first.release()
    first.release()   # idempotent


def test_a_fixed_domain_is_used_as_given_even_when_held():
    """An explicit id is the caller's choice (a test pinning its domain): used as given."""
    with reserve_domain_id(DOMAIN_ID_FIRST_DERIVED) as a, \
            reserve_domain_id(DOMAIN_ID_FIRST_DERIVED) as b:
        assert a.domain_id == b.domain_id == DOMAIN_ID_FIRST_DERIVED
