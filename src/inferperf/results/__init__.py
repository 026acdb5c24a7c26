"""Result documents: pydantic models (schema v1), case keys, JSON + ``.npz`` sidecar I/O."""

from .io import case_key, load, save, sidecar_path
from .model import SCHEMA_VERSION, Result

__all__ = ["SCHEMA_VERSION", "Result", "case_key", "load", "save", "sidecar_path"]
