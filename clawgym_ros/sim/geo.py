"""Geodesy for simulated GPS: local ENU (the scene's world frame) <-> WGS84 geodetic.

Exact WGS84 ellipsoid conversions through ECEF (no flat-earth approximation), matching Gazebo's
``spherical_coordinates`` with ``world_frame_orientation`` ENU.
"""

from __future__ import annotations

import math

import numpy as np

WGS84_A = 6378137.0                     # semi-major axis (m)
WGS84_F = 1.0 / 298.257223563           # flattening
WGS84_E2 = WGS84_F * (2.0 - WGS84_F)    # first eccentricity squared
WGS84_B = WGS84_A * (1.0 - WGS84_F)     # semi-minor axis (m)
_EP2 = (WGS84_A**2 - WGS84_B**2) / WGS84_B**2


def geodetic_to_ecef(lat_deg: float, lon_deg: float, alt: float) -> np.ndarray:
    """ECEF position (m) of a WGS84 latitude/longitude (degrees) and ellipsoidal altitude (m)."""
    lat, lon = math.radians(lat_deg), math.radians(lon_deg)
    n = WGS84_A / math.sqrt(1.0 - WGS84_E2 * math.sin(lat) ** 2)
    return np.array([(n + alt) * math.cos(lat) * math.cos(lon),
                     (n + alt) * math.cos(lat) * math.sin(lon),
                     (n * (1.0 - WGS84_E2) + alt) * math.sin(lat)])


def ecef_to_geodetic(xyz: np.ndarray) -> tuple[float, float, float]:
    """WGS84 (latitude deg, longitude deg, altitude m) of an ECEF position (Bowring's method,
    refined twice: sub-millimetre near the surface)."""
    x, y, z = (float(v) for v in xyz)
    lon = math.atan2(y, x)
    p = math.hypot(x, y)
    lat = math.atan2(z, p * (1.0 - WGS84_E2))
    for _ in range(3):
        n = WGS84_A / math.sqrt(1.0 - WGS84_E2 * math.sin(lat) ** 2)
        alt = p / math.cos(lat) - n if abs(lat) < math.pi / 4 else \
            z / math.sin(lat) - n * (1.0 - WGS84_E2)
        lat = math.atan2(z, p * (1.0 - WGS84_E2 * n / (n + alt)))
    n = WGS84_A / math.sqrt(1.0 - WGS84_E2 * math.sin(lat) ** 2)
    alt = p / math.cos(lat) - n if abs(lat) < math.pi / 4 else \
        z / math.sin(lat) - n * (1.0 - WGS84_E2)
    return math.degrees(lat), math.degrees(lon), alt


def _enu_rotation(lat_deg: float, lon_deg: float) -> np.ndarray:
    lat, lon = math.radians(lat_deg), math.radians(lon_deg)
    sl, cl, so, co = math.sin(lat), math.cos(lat), math.sin(lon), math.cos(lon)
    # rows: east, north, up expressed in ECEF
    return np.array([[-so, co, 0.0],
                     [-sl * co, -sl * so, cl],
                     [cl * co, cl * so, sl]])


def enu_to_geodetic(enu: np.ndarray, origin: tuple[float, float, float]
                    ) -> tuple[float, float, float]:
    """Latitude/longitude (deg) and altitude (m) of a local ENU point.

    Args:
        enu: (east, north, up) in metres relative to the origin.
        origin: (latitude deg, longitude deg, altitude m) of the ENU origin.

    Returns:
        (latitude deg, longitude deg, altitude m).
    """
    lat0, lon0, alt0 = origin
    ecef = geodetic_to_ecef(lat0, lon0, alt0) + _enu_rotation(lat0, lon0).T @ np.asarray(enu)
    return ecef_to_geodetic(ecef)


def geodetic_to_enu(lat_deg: float, lon_deg: float, alt: float,
                    origin: tuple[float, float, float]) -> np.ndarray:
    """Local ENU (m) of a geodetic point relative to ``origin`` (lat deg, lon deg, alt m)."""
    lat0, lon0, alt0 = origin
    delta = geodetic_to_ecef(lat_deg, lon_deg, alt) - geodetic_to_ecef(lat0, lon0, alt0)
    return _enu_rotation(lat0, lon0) @ delta
