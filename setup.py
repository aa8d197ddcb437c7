"""ament_python set-up of clawgym_ros (works with colcon and with pip install -e)."""

from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "clawgym_ros"
NODES = (
    "sim",
    "planner",
    "sensor_noise",
    "gps_dropout",
    "lighting",
    "dynamics",
    "policy",
    "synthesis",
    "trainer",
    "evaluator",
    "coordinator",
    "safety",
    "calibration",
)


def share_tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries installing ``folder`` (recursively) into share/clawgym_ros."""
    entries = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            dest = str(Path("share", PACKAGE, path.parent))
            entries.setdefault(dest, []).append(str(path))
    return sorted(entries.items())


def node_scripts() -> list[str]:
    present = {Path(p).stem for p in glob(f"{PACKAGE}/nodes/*_node.py")}
    return [
        f"{role}_node = {PACKAGE}.nodes.{role}_node:main"
        for role in NODES
        if f"{role}_node" in present
    ]


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *share_tree("launch"),
        *share_tree("config"),
        *share_tree("worlds"),
        *share_tree("urdf"),
    ],
    include_package_data=True,
    install_requires=["setuptools"],
    # --executor ray (clawgym synth / eval): Ray tasks on a local or multi-node cluster
    extras_require={"ray": ["ray==2.52.0"]},
    zip_safe=False,
    maintainer="ClawGym developers",
    maintainer_email="clawgym@example.org",
    description="Closed-loop synthesis, training and evaluation of claw agents on ROS 2.",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [f"clawgym = {PACKAGE}.cli:main", *node_scripts()],
        # Policy types outside the built-in mlp/cnn register here (docs/extending.md): the
        # residual policy of RL fine-tuning uses the same path a third-party package would.
        f"{PACKAGE}.policies": [f"residual = {PACKAGE}.training.residual:ResidualPolicy"],
    },
)
