"""Triton's protobuf messages, built at run time from the vendored descriptors beside this module.

``model_config.descriptor.txtpb`` (``inference.ModelConfig`` and its parts) and ``grpc_service.descriptor.txtpb``
(``inference.GRPCInferenceService`` and its requests and responses, which import the first) are protoc's output
for triton-inference-server/common's .proto files, written as text by ``scripts/make_triton_descriptor.py``.
Building the classes here (protobuf's ``descriptor_pool`` and ``message_factory``) works with any protobuf
runtime; tritonclient's generated modules are not imported: they pin protobuf < 4 (2.40.0) or 6.x (2.73.0).
"""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import Any

#: vendored descriptors, in import order (grpc_service.proto imports model_config.proto)
DESCRIPTORS = ("model_config.descriptor.txtpb", "grpc_service.descriptor.txtpb")


@functools.cache
def pool() -> Any:
    """One ``DescriptorPool`` holding both vendored files (built once)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, text_format

    out = descriptor_pool.DescriptorPool()
    for name in DESCRIPTORS:
        out.Add(text_format.Parse(files(__package__).joinpath(name).read_text(), descriptor_pb2.FileDescriptorProto()))
    return out


@functools.cache
def message(full_name: str) -> Any:
    """The message class ``full_name`` (e.g. ``inference.ModelInferRequest``).

    Raises:
        KeyError: no such message in the vendored files.
    """
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))


def service() -> Any:
    """The ``inference.GRPCInferenceService`` service descriptor (its methods' names and message types)."""
    return pool().FindServiceByName("inference.GRPCInferenceService")


__all__ = ["DESCRIPTORS", "message", "pool", "service"]
