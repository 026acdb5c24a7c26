"""Workload: model signature -> concrete shapes -> a pool of seeded (or user) inputs."""

from .data import Workload, build_workload
from .shapes import parse_dims, parse_int_range, parse_shape, parse_value, resolve_shapes

__all__ = [
    "Workload",
    "build_workload",
    "parse_dims",
    "parse_int_range",
    "parse_shape",
    "parse_value",
    "resolve_shapes",
]
