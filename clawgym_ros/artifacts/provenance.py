"""Provenance facts recorded in every manifest: package versions, the numeric platform and the
project's git commit."""

from __future__ import annotations

import ctypes
import functools
import subprocess
import sys
from importlib import metadata
from pathlib import Path

# Distribution names whose versions matter for reproducing a result.
KEY_DISTRIBUTIONS: tuple[str, ...] = (
    "clawgym_ros",
    "numpy",
    "mujoco",
    "ompl",
    "torch",
    "gymnasium",
    "mcap",
    "ros-rclpy",
    "toppra",
    "mink",
)


@functools.cache
def package_versions() -> dict[str, str]:
    """Versions of the key distributions that are installed (missing ones are left out), and
    the numeric platform (:func:`numeric_platform`) under ``platform:<name>`` keys."""
    versions = {}
    for name in KEY_DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    versions.update({f"platform:{k}": v for k, v in numeric_platform().items()})
    return versions


@functools.cache
def blas_kernel() -> str:
    """The OpenBLAS kernel numpy runs on this CPU (``Haswell``, ``SkylakeX``, ...), or ``""``
    when numpy's bundled OpenBLAS cannot be asked.

    Same seed, same result holds bit for bit for one kernel: OpenBLAS picks its kernels by
    CPU at run time (``DYNAMIC_ARCH``), and two kernels may round a small matrix product
    differently in the last bit, which a simulated trajectory then carries into every later
    step (measured: the same evaluation under ``OPENBLAS_CORETYPE=Haswell`` and ``Prescott``
    gives two report ids).
    """
    import numpy as np

    libs = sorted((Path(np.__file__).resolve().parent.parent / "numpy.libs").glob("*openblas*"))
    for lib in libs:
        try:
            handle = ctypes.CDLL(str(lib))
        except OSError:
            continue
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                     "openblas_get_corename64_", "openblas_get_corename"):
            get = getattr(handle, name, None)
            if get is not None:
                get.restype = ctypes.c_char_p
                return get().decode("ascii", "replace")
    return ""


def numeric_platform() -> dict[str, str]:
    """What decides floating-point results beside the code and the seeds: numpy's OpenBLAS
    kernel and, where this process has imported torch (it is not imported for this: seconds
    and hundreds of MB in a process that never trains), torch's CPU vector capability
    (``AVX2``, ``AVX512``; its vectorized ``atan2``, ``sin``, ``cos`` differ in the last bit
    between the two). Keys whose value is unknown are left out."""
    out = {}
    kernel = blas_kernel()
    if kernel:
        out["blas_kernel"] = kernel
    torch = sys.modules.get("torch")
    capability = getattr(getattr(getattr(torch, "backends", None), "cpu", None),
                         "get_cpu_capability", None)
    if capability is not None:
        out["torch_cpu"] = str(capability())
    return out


@functools.cache
def git_commit() -> str:
    """The project's git commit (with ``-dirty`` when the tree has changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha
