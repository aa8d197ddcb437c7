"""Content-addressed artifact store with manifests, lineage and atomic writes."""

from clawgym_ros.artifacts.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from clawgym_ros.artifacts.store import Artifact, ArtifactStore, Manifest, validate_id_syntax

__all__ = [
    "Artifact",
    "ArtifactStore",
    "Manifest",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "validate_id_syntax",
]
