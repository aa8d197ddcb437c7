"""Mobile-base navigation cores: pose EKF, visibility-graph router, pure-pursuit controller.

Pure NumPy (no MuJoCo, no rclpy), shared by the ``gps_nav`` expert and usable by a ROS node:

- :class:`PoseEkf`: planar pose (x, y, yaw in the local ENU frame) fused from wheel odometry
  (forward speed), IMU yaw rate (prediction), GPS fixes converted to ENU (position update,
  with the antenna's lever arm) and the IMU orientation (heading update). Without GPS it
  dead-reckons, and its position covariance grows, which is what carries the base through
  outages.
- :class:`Router`: shortest collision-free polyline between two points around inflated
  obstacles (rotated boxes and cylinders as convex polygons), by Dijkstra on the visibility
  graph of the inflated polygons' corners.
- :class:`PurePursuit`: speed and turn-rate commands that follow a polyline, turning in place
  when the heading error is large and slowing down near the end.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Sequence

import numpy as np

from clawgym_ros.config import check_range


def wrap_angle(a: float) -> float:
    """``a`` wrapped to (-pi, pi]."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def wheel_odometry(wheel_velocity: Sequence[float], radius: float,
                   separation: float) -> tuple[float, float]:
    """(forward speed m/s, yaw rate rad/s) of a differential drive from wheel rates (rad/s)."""
    left, right = float(wheel_velocity[0]), float(wheel_velocity[1])
    return radius * (left + right) / 2.0, radius * (right - left) / separation


# --- state estimation -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EkfConfig:
    """Noise model of :class:`PoseEkf` (standard deviations).

    Attributes:
        speed_std: wheel-odometry speed noise per sqrt(s) of integration, as a fraction of
            the speed plus a floor (m/s).
        yaw_rate_std: gyro yaw-rate noise, rad/s.
        gps_std: GPS horizontal position noise, m.
        heading_std: IMU heading noise, rad.
        antenna_offset: GPS antenna position in the base frame (x forward, y left), m.
    """

    speed_std: float = 0.05
    yaw_rate_std: float = 0.02
    gps_std: float = 1.0
    heading_std: float = 0.05
    antenna_offset: tuple[float, float] = (-0.15, 0.0)

    def __post_init__(self) -> None:
        for name in ("speed_std", "yaw_rate_std", "gps_std", "heading_std"):
            check_range(name, getattr(self, name), 0.0, 100.0, low_open=True)


class PoseEkf:
    """Extended Kalman filter over the planar pose ``(x, y, yaw)``.

    Args:
        config: noise model.
    """

    def __init__(self, config: EkfConfig | None = None) -> None:
        self.config = config or EkfConfig()
        self.state = np.zeros(3)
        self.cov = np.diag([1e6, 1e6, 10.0])
        self.initialized = False

    def initialize(self, xy: Sequence[float], yaw: float, position_std: float) -> None:
        """Start from a position (of the base, m) and heading (rad)."""
        self.state = np.array([float(xy[0]), float(xy[1]), wrap_angle(float(yaw))])
        self.cov = np.diag([position_std ** 2, position_std ** 2,
                            self.config.heading_std ** 2])
        self.initialized = True

    @property
    def position_std(self) -> float:
        """Standard deviation of the position estimate (root of the larger eigenvalue), m."""
        return float(math.sqrt(max(np.linalg.eigvalsh(self.cov[:2, :2]))))

    def predict(self, speed: float, yaw_rate: float, dt: float) -> None:
        """Propagate by unicycle motion for ``dt`` seconds."""
        x, y, yaw = self.state
        mid = yaw + 0.5 * yaw_rate * dt
        c, s = math.cos(mid), math.sin(mid)
        self.state = np.array([x + speed * c * dt, y + speed * s * dt,
                               wrap_angle(yaw + yaw_rate * dt)])
        jac = np.array([[1.0, 0.0, -speed * s * dt], [0.0, 1.0, speed * c * dt],
                        [0.0, 0.0, 1.0]])
        cfg = self.config
        v_std = cfg.speed_std * (0.1 + abs(speed))
        g = np.array([[c * dt, 0.0], [s * dt, 0.0], [0.0, dt]])
        q = g @ np.diag([v_std ** 2 / max(dt, 1e-9) * dt, cfg.yaw_rate_std ** 2]) @ g.T
        self.cov = jac @ self.cov @ jac.T + q + np.eye(3) * 1e-9

    def _antenna(self) -> tuple[np.ndarray, np.ndarray]:
        ox, oy = self.config.antenna_offset
        _, _, yaw = self.state
        c, s = math.cos(yaw), math.sin(yaw)
        pred = self.state[:2] + np.array([c * ox - s * oy, s * ox + c * oy])
        dpos_dyaw = np.array([-s * ox - c * oy, c * ox - s * oy])
        return pred, dpos_dyaw

    def update_gps(self, antenna_xy: Sequence[float], std: float | None = None) -> float:
        """Fuse a GPS antenna position (ENU, m); returns the innovation's Mahalanobis norm."""
        std = self.config.gps_std if std is None else std
        pred, dyaw = self._antenna()
        h = np.array([[1.0, 0.0, dyaw[0]], [0.0, 1.0, dyaw[1]]])
        innov = np.asarray(antenna_xy[:2], dtype=float) - pred
        s = h @ self.cov @ h.T + np.eye(2) * std ** 2
        gain = self.cov @ h.T @ np.linalg.inv(s)
        self.state = self.state + gain @ innov
        self.state[2] = wrap_angle(self.state[2])
        self.cov = (np.eye(3) - gain @ h) @ self.cov
        return float(math.sqrt(innov @ np.linalg.solve(s, innov)))

    def update_heading(self, yaw: float, std: float | None = None) -> None:
        """Fuse an absolute heading (rad), e.g. from the IMU orientation."""
        std = self.config.heading_std if std is None else std
        innov = wrap_angle(float(yaw) - self.state[2])
        s = self.cov[2, 2] + std ** 2
        gain = self.cov[:, 2] / s
        self.state = self.state + gain * innov
        self.state[2] = wrap_angle(self.state[2])
        self.cov = self.cov - np.outer(gain, self.cov[2, :])

    def base_from_antenna(self, antenna_xy: Sequence[float], yaw: float) -> np.ndarray:
        """Base position whose antenna is at ``antenna_xy`` with heading ``yaw``."""
        ox, oy = self.config.antenna_offset
        c, s = math.cos(yaw), math.sin(yaw)
        return np.asarray(antenna_xy[:2], dtype=float) - np.array([c * ox - s * oy,
                                                                   s * ox + c * oy])


def yaw_from_quat(q: Sequence[float]) -> float:
    """Yaw (rad) of a (w, x, y, z) quaternion."""
    w, x, y, z = (float(v) for v in q[:4])
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


# --- routing ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Obstacle2D:
    """A convex obstacle footprint: polygon corners (counter-clockwise), metres."""

    name: str
    corners: np.ndarray

    @classmethod
    def box(cls, name: str, center: Sequence[float], size: Sequence[float], yaw: float,
            inflate: float) -> Obstacle2D:
        """A rotated rectangle (full sizes) grown by ``inflate`` (as an octagon: the
        Minkowski sum with a disc, circumscribed)."""
        hx, hy = size[0] / 2.0, size[1] / 2.0
        c, s = math.cos(yaw), math.sin(yaw)
        rect = np.array([[hx, hy], [-hx, hy], [-hx, -hy], [hx, -hy]]) @ np.array(
            [[c, s], [-s, c]])
        r = inflate / math.cos(math.pi / 8)
        ang = np.arange(8) * math.pi / 4 + math.pi / 8
        octagon = np.stack([r * np.cos(ang), r * np.sin(ang)], axis=1)
        points = (rect[:, None, :] + octagon[None, :, :]).reshape(-1, 2)
        corners = convex_hull(points) + np.asarray(center[:2], dtype=float)
        return cls(name, corners)

    @classmethod
    def disc(cls, name: str, center: Sequence[float], radius: float, inflate: float,
             sides: int = 12) -> Obstacle2D:
        """A disc grown by ``inflate``, as a circumscribed regular polygon."""
        r = (radius + inflate) / math.cos(math.pi / sides)
        ang = np.arange(sides) * 2.0 * math.pi / sides + math.pi / sides
        corners = np.stack([r * np.cos(ang), r * np.sin(ang)], axis=1) + np.asarray(
            center[:2], dtype=float)
        return cls(name, corners)

    def contains(self, p: Sequence[float], margin: float = 0.0) -> bool:
        """Whether ``p`` lies inside (deeper than ``margin`` m)."""
        for a, b in zip(self.corners, np.roll(self.corners, -1, axis=0), strict=True):
            edge = b - a
            normal = np.array([edge[1], -edge[0]]) / np.linalg.norm(edge)
            if (np.asarray(p[:2]) - a) @ normal >= -margin:
                return False
        return True

    def blocks(self, p: Sequence[float], q: Sequence[float]) -> bool:
        """Whether the open segment p-q passes through the polygon's interior."""
        p, q = np.asarray(p[:2], dtype=float), np.asarray(q[:2], dtype=float)
        d = q - p
        t0, t1 = 0.0, 1.0
        for a, b in zip(self.corners, np.roll(self.corners, -1, axis=0), strict=True):
            edge = b - a
            normal = np.array([edge[1], -edge[0]])   # outward for counter-clockwise corners
            num = (p - a) @ normal
            den = d @ normal
            if abs(den) < 1e-12:
                if num > -1e-9:
                    return False
                continue
            t = -num / den
            if den < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
            if t0 >= t1 - 1e-9:
                return False
        return True


def scene_obstacles(shapes: Sequence[object], inflate: float) -> list[Obstacle2D]:
    """2-D footprints of a scene's static shapes (``clawgym_ros.sim.scene_spec.Shape``), grown by
    ``inflate`` (robot radius + margin); the floor and anything flat is skipped."""
    out = []
    for shape in shapes:
        name, kind = shape.name, shape.shape
        if name == "floor":
            continue
        if kind == "box":
            yaw = float(shape.rpy[2]) if getattr(shape, "rpy", None) else 0.0
            out.append(Obstacle2D.box(name, shape.pos, shape.size, yaw, inflate))
        elif kind in ("cylinder", "sphere"):
            out.append(Obstacle2D.disc(name, shape.pos, shape.size[0], inflate))
    return out


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull of 2-D points (Andrew's monotone chain)."""
    pts = sorted({(round(float(x), 9), round(float(y), 9)) for x, y in points})

    def cross(o: tuple, a: tuple, b: tuple) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[tuple] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


class NoRouteError(RuntimeError):
    """No collision-free route exists between the requested points."""


class Router:
    """Shortest polylines around convex obstacles (visibility graph + Dijkstra).

    Args:
        obstacles: inflated footprints.
    """

    def __init__(self, obstacles: Sequence[Obstacle2D]) -> None:
        self.obstacles = list(obstacles)
        self._nodes = [c for o in self.obstacles for c in o.corners
                       if not any(p.contains(c, 1e-6) for p in self.obstacles)]

    def free(self, p: Sequence[float]) -> bool:
        """Whether ``p`` is outside every inflated obstacle."""
        return not any(o.contains(p) for o in self.obstacles)

    def visible(self, p: Sequence[float], q: Sequence[float]) -> bool:
        """Whether the segment p-q crosses no inflated obstacle."""
        return not any(o.blocks(p, q) for o in self.obstacles)

    def route(self, start: Sequence[float], goal: Sequence[float]) -> np.ndarray:
        """(N, 2) polyline from ``start`` to ``goal`` (both included).

        Raises:
            NoRouteError: the goal is inside an obstacle or unreachable.
        """
        start = np.asarray(start[:2], dtype=float)
        goal = np.asarray(goal[:2], dtype=float)
        if not self.free(goal):
            raise NoRouteError(f"goal {goal.round(2).tolist()} lies inside an obstacle")
        if self.visible(start, goal):
            return np.stack([start, goal])
        nodes = [start, goal, *self._nodes]
        n = len(nodes)
        dist = [math.inf] * n
        prev = [-1] * n
        dist[0] = 0.0
        heap = [(0.0, 0)]
        while heap:
            d, i = heapq.heappop(heap)
            if d > dist[i]:
                continue
            if i == 1:
                break
            for j in range(1, n):
                if j == i:
                    continue
                nd = d + float(np.linalg.norm(nodes[j] - nodes[i]))
                if nd < dist[j] and self.visible(nodes[i], nodes[j]):
                    dist[j] = nd
                    prev[j] = i
                    heapq.heappush(heap, (nd, j))
        if not math.isfinite(dist[1]):
            raise NoRouteError(f"no route from {start.round(2).tolist()} to "
                               f"{goal.round(2).tolist()}")
        path = [1]
        while path[-1] != 0:
            path.append(prev[path[-1]])
        return np.stack([nodes[i] for i in reversed(path)])


# --- control ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PursuitConfig:
    """Pure-pursuit parameters (m, m/s, rad/s, rad)."""

    lookahead: float = 0.8
    max_speed: float = 0.8
    max_yaw_rate: float = 1.5
    turn_in_place: float = 1.0
    slow_radius: float = 1.2
    min_speed: float = 0.15
    accel: float = 1.0

    def __post_init__(self) -> None:
        check_range("lookahead", self.lookahead, 0.05, 10.0)
        check_range("max_speed", self.max_speed, 0.0, 1.0, low_open=True)
        check_range("max_yaw_rate", self.max_yaw_rate, 0.0, 2.0, low_open=True)


class PurePursuit:
    """Follows a polyline: (speed, yaw rate) from the estimated pose.

    Args:
        path: (N, 2) polyline; the last point is the goal.
        config: gains and limits.
    """

    def __init__(self, path: np.ndarray, config: PursuitConfig | None = None,
                 speed: float = 0.0) -> None:
        self.path = np.asarray(path, dtype=float)
        self.config = config or PursuitConfig()
        self._seg = 0
        self._speed = speed

    def _carrot(self, p: np.ndarray) -> np.ndarray:
        path, la = self.path, self.config.lookahead
        # advance the segment index past segments whose end is behind us
        while self._seg < len(path) - 2:
            a, b = path[self._seg], path[self._seg + 1]
            ab = b - a
            t = float((p - a) @ ab / max(ab @ ab, 1e-12))
            if t < 1.0 and np.linalg.norm(b - p) > la:
                break
            self._seg += 1
        a, b = path[self._seg], path[self._seg + 1]
        ab = b - a
        t = float(np.clip((p - a) @ ab / max(ab @ ab, 1e-12), 0.0, 1.0))
        foot = a + t * ab
        # walk `lookahead` along the path from the foot point
        remaining = la
        point, seg = foot, self._seg
        while True:
            end = path[seg + 1]
            step = float(np.linalg.norm(end - point))
            if step >= remaining or seg + 1 == len(path) - 1:
                if step < 1e-9:
                    return end
                return point + (end - point) * min(1.0, remaining / step)
            remaining -= step
            point, seg = end, seg + 1

    def command(self, pose: Sequence[float], dt: float) -> tuple[float, float]:
        """(speed m/s, yaw rate rad/s) toward the path from ``pose`` = (x, y, yaw)."""
        cfg = self.config
        p = np.asarray(pose[:2], dtype=float)
        carrot = self._carrot(p)
        goal = self.path[-1]
        to_goal = float(np.linalg.norm(goal - p))
        vec = carrot - p
        alpha = wrap_angle(math.atan2(vec[1], vec[0]) - float(pose[2]))
        if abs(alpha) > cfg.turn_in_place:
            target_v = 0.0
            w = math.copysign(cfg.max_yaw_rate, alpha) * min(1.0, abs(alpha))
        else:
            target_v = cfg.max_speed * max(0.0, math.cos(alpha))
            if to_goal < cfg.slow_radius:
                target_v = min(target_v, max(cfg.min_speed,
                                             cfg.max_speed * to_goal / cfg.slow_radius))
            dist = max(float(np.linalg.norm(vec)), 1e-6)
            w = 2.0 * max(target_v, cfg.min_speed) * math.sin(alpha) / dist
        step = cfg.accel * dt
        self._speed = float(np.clip(target_v, self._speed - step, self._speed + step))
        w = float(np.clip(w, -cfg.max_yaw_rate, cfg.max_yaw_rate))
        return self._speed, w

    def distance_to_goal(self, pose: Sequence[float]) -> float:
        """Euclidean distance from ``pose`` to the last point, m."""
        return float(np.linalg.norm(self.path[-1] - np.asarray(pose[:2], dtype=float)))


def polyline_distance(path: np.ndarray, p: Sequence[float]) -> float:
    """Shortest distance from ``p`` to the polyline ``path`` (N, 2), m."""
    p = np.asarray(p[:2], dtype=float)
    best = math.inf
    for a, b in zip(path[:-1], path[1:], strict=True):
        ab = b - a
        t = float(np.clip((p - a) @ ab / max(ab @ ab, 1e-12), 0.0, 1.0))
        best = min(best, float(np.linalg.norm(a + t * ab - p)))
    if len(path) == 1:
        best = float(np.linalg.norm(path[0] - p))
    return best
