"""Result documents: pydantic models (schema v1), the one envelope builder, case keys and content hashes,
JSON + ``.npz`` sidecar I/O."""

from .build import content_hash, new_result, utc_now
from .io import case_key, load, save, sidecar_path
from .model import SCHEMA_VERSION, Result

__all__ = [
    "SCHEMA_VERSION", "Result", "case_key", "content_hash", "load", "new_result", "save", "sidecar_path", "utc_now",
]
