"""Hardware-in-the-loop safety filter: velocity clamps, workspace box, latched e-stop."""

from __future__ import annotations

import math

import pytest

from clawgym_ros.errors import ConfigError
from clawgym_ros.safety import CLAMPED, PASS, REJECTED, STOPPED, SafetyFilter, SafetyLimits


def test_twist_is_clamped_keeping_direction():
    f = SafetyFilter(SafetyLimits(max_linear_speed=0.3, max_angular_speed=0.5))
    v = f.filter_twist((0.6, 0.8), 2.0, (0.0, 0.0), now=0.0)
    assert v.action == CLAMPED
    vx, vy, wz = v.command
    assert math.hypot(vx, vy) == pytest.approx(0.3)
    assert vy / vx == pytest.approx(0.8 / 0.6)
    assert wz == 0.5
    assert f.filter_twist((0.1, 0.0), 0.1, (0.0, 0.0), 0.0).action == PASS


def test_twist_leaving_the_region_is_rejected():
    f = SafetyFilter(SafetyLimits(base_min=(-1.0, -1.0), base_max=(1.0, 1.0), horizon_s=1.0))
    v = f.filter_twist((0.2, 0.0), 0.0, (0.9, 0.0), 0.0)
    assert v.action == REJECTED and v.command == (0.0, 0.0, 0.0)
    assert f.filter_twist((0.2, 0.0), 0.0, (0.0, 0.0), 0.0).action == PASS
    # Outside already: only a zero command passes.
    assert f.filter_twist((0.1, 0.0), 0.0, (2.0, 0.0), 0.0).action == REJECTED
    assert f.filter_twist((0.0, 0.0), 0.3, (2.0, 0.0), 0.0).action == PASS
    assert f.filter_twist((math.nan, 0.0), 0.0, None, 0.0).action == REJECTED


def test_joint_steps_are_limited_and_workspace_enforced():
    lim = SafetyLimits(max_joint_speed=0.5)
    f = SafetyFilter(lim)
    cur = [0.0] * 7
    v = f.filter_joints([1.0] + [0.0] * 6, cur, dt=0.1, tool_position=(0.5, 0.0, 0.5), now=0)
    assert v.action == CLAMPED and v.command[0] == pytest.approx(0.05)
    v = f.filter_joints([0.01] * 7, cur, dt=0.1, tool_position=(1.5, 0.0, 0.5), now=0)
    assert v.action == REJECTED and v.command == tuple(cur)
    # With forward kinematics the target's tool position is checked, not the measured one.
    fk = SafetyFilter(lim, fk=lambda q: (0.5 + 10 * q[0], 0.0, 0.5))
    assert fk.filter_joints([0.01] + [0.0] * 6, cur, 0.1, None, 0).action == PASS
    assert fk.filter_joints([0.05] + [0.0] * 6, cur, 0.1, None, 0).action == REJECTED
    assert f.filter_joints([0.0] * 6, cur, 0.1, None, 0).action == REJECTED


def test_a_target_due_at_once_moves_one_command_period():
    """policy_node sends a target without velocity as one point at time_from_start 0 (held
    from now on); with dt 0 the step limit was 0 and the robot never moved (found by the HIL
    graph test)."""
    f = SafetyFilter(SafetyLimits(max_joint_speed=0.5, command_period_s=0.02))
    v = f.filter_joints([1.0] + [0.0] * 6, [0.0] * 7, dt=0.0, tool_position=None, now=0)
    assert v.action == CLAMPED and v.command[0] == pytest.approx(0.01)
    assert f.filter_joints([0.005] + [0.0] * 6, [0.0] * 7, 0.0, None, 0).action == PASS
    # A later target keeps its own time: 0.1 s at 0.5 rad/s.
    v = f.filter_joints([1.0] + [0.0] * 6, [0.0] * 7, 0.1, None, 0)
    assert v.command[0] == pytest.approx(0.05)
    with pytest.raises(ConfigError):
        SafetyLimits(command_period_s=0.0)


def test_estop_latches_until_reset_and_heartbeat_timeout():
    f = SafetyFilter(SafetyLimits(estop_timeout_s=0.5))
    # Before the first heartbeat: held, not latched (however long the console takes).
    v = f.filter_twist((0.1, 0.0), 0.0, None, 0.0)
    assert v.action == STOPPED and "waiting for the first e-stop heartbeat" in v.reason
    assert f.filter_twist((0.1, 0.0), 0.0, None, 30.0).action == STOPPED and not f.stopped
    f.estop(False, now=0.0)
    assert f.filter_twist((0.1, 0.0), 0.0, None, 0.2).action == PASS
    f.estop(True, now=0.3)
    f.estop(False, now=0.35)          # releasing the button does not clear the latch
    v = f.filter_twist((0.1, 0.0), 0.0, None, 0.4)
    assert v.action == STOPPED and v.command == (0.0, 0.0, 0.0)
    assert f.filter_joints([0.1] * 7, [0.0] * 7, 0.1, None, 0.4).command == (0.0,) * 7
    f.reset(now=1.0)
    assert f.filter_twist((0.1, 0.0), 0.0, None, 1.2).action == PASS
    v = f.filter_twist((0.1, 0.0), 0.0, None, 1.8)   # heartbeat overdue by 0.8 s
    assert v.action == STOPPED and "heartbeat" in v.reason


def test_limits_are_validated():
    with pytest.raises(ConfigError, match="workspace_max"):
        SafetyLimits(workspace_min=(0, 0, 0), workspace_max=(1, -1, 1))
    with pytest.raises(ConfigError, match="max_linear_speed"):
        SafetyLimits(max_linear_speed=-1.0)
