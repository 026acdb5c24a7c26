"""Triton's ``config.pbtxt``: read with protobuf's ``text_format`` into a ``ModelConfig`` message, mapped to inferperf.

The message types are built here at import from the field names and numbers of Triton's
``model_config.proto`` (triton-inference-server/common, protobuf/model_config.proto): every field of
``ModelConfig`` itself, and in full the parts inferperf maps (``input``, ``output``, ``dynamic_batching``
with its ``default_queue_policy``, ``instance_group``, ``version_policy``). The others
(``optimization``, ``sequence_batching``, ``model_warmup`` ...) are declared with an opaque message type
whose contents are skipped, so any valid Triton config parses and the fields inferperf ignores can be
named. tritonclient's generated module is not used: its package needs grpcio and pins protobuf < 4, which
onnx cannot share. No hand-written pbtxt parsing.

Mapped: ``max_batch_size``; ``dynamic_batching { max_queue_delay_microseconds, preferred_batch_size,
default_queue_policy { max_queue_size, default_timeout_microseconds (with timeout_action REJECT, rounded
up to ms) } }``; ``instance_group { count }`` (summed over CPU / AUTO groups);
``version_policy`` (``latest { num_versions }``, default 1; ``all``; ``specific { versions }``);
``default_model_filename`` (default ``model.onnx``); ``platform`` / ``backend`` must name ONNX Runtime
(``onnxruntime_onnx`` / ``onnxruntime``) when given; ``input`` / ``output`` names must be the model's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

_PACKAGE = "inference"
_F = descriptor_pb2.FieldDescriptorProto

_DATA_TYPES = ["TYPE_INVALID", "TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64", "TYPE_INT8",
               "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16", "TYPE_FP32", "TYPE_FP64", "TYPE_STRING",
               "TYPE_BF16"]  # fmt: skip

_SCALAR = {"string": _F.TYPE_STRING, "int32": _F.TYPE_INT32, "int64": _F.TYPE_INT64, "uint32": _F.TYPE_UINT32,
           "uint64": _F.TYPE_UINT64, "bool": _F.TYPE_BOOL, "float": _F.TYPE_FLOAT}  # fmt: skip

# (message, [(field, number, type, repeated)]): type = a scalar name, "enum:NAME" or a message name.
_MESSAGES: list[tuple[str, list[tuple[str, int, str, bool]]]] = [
    ("Opaque", []),
    ("ModelTensorReshape", [("shape", 1, "int64", True)]),
    ("ModelInput", [("name", 1, "string", False), ("data_type", 2, "enum:DataType", False),
                    ("format", 3, "enum:Format", False), ("dims", 4, "int64", True),
                    ("reshape", 5, "ModelTensorReshape", False), ("is_shape_tensor", 6, "bool", False),
                    ("allow_ragged_batch", 7, "bool", False), ("optional", 8, "bool", False),
                    ("is_non_linear_format_io", 9, "bool", False)]),
    ("ModelOutput", [("name", 1, "string", False), ("data_type", 2, "enum:DataType", False),
                     ("dims", 3, "int64", True), ("reshape", 5, "ModelTensorReshape", False),
                     ("label_filename", 4, "string", False), ("is_shape_tensor", 6, "bool", False),
                     ("is_non_linear_format_io", 7, "bool", False)]),
    ("ModelQueuePolicy", [("timeout_action", 1, "enum:TimeoutAction", False),
                          ("default_timeout_microseconds", 2, "uint64", False),
                          ("allow_timeout_override", 3, "bool", False), ("max_queue_size", 4, "uint32", False)]),
    ("ModelDynamicBatching", [("preferred_batch_size", 1, "int32", True),
                              ("max_queue_delay_microseconds", 2, "uint64", False),
                              ("preserve_ordering", 3, "bool", False), ("priority_levels", 4, "uint64", False),
                              ("default_priority_level", 5, "uint64", False),
                              ("default_queue_policy", 6, "ModelQueuePolicy", False),
                              ("priority_queue_policy", 7, "Opaque", True)]),
    ("ModelInstanceGroup", [("name", 1, "string", False), ("kind", 4, "enum:Kind", False), ("count", 2, "int32", False),
                            ("rate_limiter", 6, "Opaque", False), ("gpus", 3, "int32", True),
                            ("secondary_devices", 8, "Opaque", True), ("profile", 5, "string", True),
                            ("passive", 7, "bool", False), ("host_policy", 9, "string", False)]),
    ("Latest", [("num_versions", 1, "uint32", False)]),
    ("All", []),
    ("Specific", [("versions", 1, "int64", True)]),
    ("ModelVersionPolicy", [("latest", 1, "Latest", False), ("all", 2, "All", False), ("specific", 3, "Specific", False)]),
    ("StringMapEntry", [("key", 1, "string", False), ("value", 2, "string", False)]),
    ("ParameterMapEntry", [("key", 1, "string", False), ("value", 2, "Opaque", False)]),
    ("ModelConfig", [("name", 1, "string", False), ("platform", 2, "string", False), ("backend", 17, "string", False),
                     ("runtime", 25, "string", False), ("version_policy", 3, "ModelVersionPolicy", False),
                     ("max_batch_size", 4, "int32", False), ("input", 5, "ModelInput", True),
                     ("output", 6, "ModelOutput", True), ("batch_input", 20, "Opaque", True),
                     ("batch_output", 21, "Opaque", True), ("optimization", 12, "Opaque", False),
                     ("dynamic_batching", 11, "ModelDynamicBatching", False),
                     ("sequence_batching", 13, "Opaque", False), ("ensemble_scheduling", 15, "Opaque", False),
                     ("instance_group", 7, "ModelInstanceGroup", True),
                     ("default_model_filename", 8, "string", False),
                     ("cc_model_filenames", 9, "StringMapEntry", True), ("metric_tags", 10, "StringMapEntry", True),
                     ("parameters", 14, "ParameterMapEntry", True), ("model_warmup", 16, "Opaque", True),
                     ("model_operations", 18, "Opaque", False), ("model_transaction_policy", 19, "Opaque", False),
                     ("model_repository_agents", 23, "Opaque", False), ("response_cache", 24, "Opaque", False),
                     ("model_metrics", 26, "Opaque", False)]),
]
_ENUMS = {"DataType": _DATA_TYPES, "Format": ["FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW"],
          "TimeoutAction": ["REJECT", "DELAY"], "Kind": ["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"]}
_MAP_ENTRIES = {"StringMapEntry", "ParameterMapEntry"}


def _build() -> Any:
    fdp = descriptor_pb2.FileDescriptorProto(name="inferperf_triton_model_config.proto", package=_PACKAGE,
                                             syntax="proto3")
    for name, values in _ENUMS.items():
        e = fdp.enum_type.add(name=name)
        for i, v in enumerate(values):
            e.value.add(name=v, number=i)
    for name, fields in _MESSAGES:
        m = fdp.message_type.add(name=name)
        if name in _MAP_ENTRIES:
            m.options.map_entry = True
        for fname, number, ftype, repeated in fields:
            f = m.field.add(name=fname, number=number,
                            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if ftype in _SCALAR:
                f.type = _SCALAR[ftype]
            elif ftype.startswith("enum:"):
                f.type, f.type_name = _F.TYPE_ENUM, f".{_PACKAGE}.{ftype[5:]}"
            else:
                f.type, f.type_name = _F.TYPE_MESSAGE, f".{_PACKAGE}.{ftype}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.ModelConfig"))


ModelConfig = _build()

#: ModelConfig fields inferperf maps; any other field set in a config is listed as ignored.
_MAPPED_TOP = {"name", "platform", "backend", "max_batch_size", "input", "output", "dynamic_batching",
               "instance_group", "version_policy", "default_model_filename"}  # fmt: skip
_MAPPED_BATCHING = {"max_queue_delay_microseconds", "preferred_batch_size", "default_queue_policy"}
_ONNX = {"onnxruntime_onnx", "onnxruntime"}


class TritonConfigError(ValueError):
    """A ``config.pbtxt`` that does not parse, or asks for what inferperf cannot serve (the message names it)."""


@dataclass
class TritonModelConfig:
    """What inferperf takes from one ``config.pbtxt``.

    ``serve``: ServeOptions fields (``max_batch_size``, ``dynamic_batching``, ``max_queue_delay_us``,
    ``preferred_batch_size``, ``max_queue_size``, ``instance_count``); ``version_policy``: ``("latest", N)``,
    ``("all", None)`` or ``("specific", [versions])``; ``inputs`` / ``outputs``: the names the config lists;
    ``ignored``: dotted names of the fields set but not mapped.
    """

    name: str
    serve: dict[str, Any]
    version_policy: tuple[str, Any]
    model_filename: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def parse(text: str, where: str = "config.pbtxt") -> TritonModelConfig:
    """Parse a Triton ``config.pbtxt`` and map it (see the module docstring).

    Raises:
        TritonConfigError: not valid text-format protobuf for ModelConfig, a platform other than ONNX
            Runtime, negative sizes or counts, or GPU instance groups only (message names ``where``).
    """
    msg = ModelConfig()
    try:
        text_format.Parse(text, msg, allow_unknown_field=True)
    except text_format.ParseError as e:
        raise TritonConfigError(f"{where}: not a Triton model configuration ({e})") from None
    platform = msg.backend or msg.platform
    if platform and platform not in _ONNX:
        raise TritonConfigError(f"{where}: platform/backend '{platform}' is not ONNX Runtime: inferperf serves"
                                " ONNX models (onnxruntime_onnx)")
    ignored = [f.name for f, _ in msg.ListFields() if f.name not in _MAPPED_TOP]
    serve: dict[str, Any] = {}
    if msg.max_batch_size < 0:
        raise TritonConfigError(f"{where}: max_batch_size {msg.max_batch_size} is negative")
    serve["max_batch_size"] = msg.max_batch_size
    if msg.HasField("dynamic_batching"):
        db = msg.dynamic_batching
        serve["dynamic_batching"] = True
        serve["max_queue_delay_us"] = int(db.max_queue_delay_microseconds)
        serve["preferred_batch_size"] = list(db.preferred_batch_size)
        if db.HasField("default_queue_policy"):
            qp = db.default_queue_policy
            serve["max_queue_size"] = int(qp.max_queue_size)
            mapped = {"max_queue_size"}
            if qp.default_timeout_microseconds and qp.timeout_action == 0:  # REJECT: fail at the deadline
                serve["request_timeout_ms"] = -(-int(qp.default_timeout_microseconds) // 1000)  # ceil to ms
                mapped.add("default_timeout_microseconds")
            ignored += [f"dynamic_batching.default_queue_policy.{f.name}" for f, _ in qp.ListFields()
                        if f.name not in mapped]
        ignored += [f"dynamic_batching.{f.name}" for f, _ in db.ListFields() if f.name not in _MAPPED_BATCHING]
    if msg.instance_group:
        cpu_groups = [g for g in msg.instance_group if g.kind in (0, 2)]  # KIND_AUTO, KIND_CPU
        if not cpu_groups:
            raise TritonConfigError(f"{where}: every instance_group is KIND_GPU/KIND_MODEL: give one KIND_CPU group")
        if any(g.count < 0 for g in cpu_groups):
            raise TritonConfigError(f"{where}: instance_group count must be >= 0")
        serve["instance_count"] = max(1, sum(g.count or 1 for g in cpu_groups))
        if len(cpu_groups) < len(msg.instance_group):
            ignored.append("instance_group (KIND_GPU/KIND_MODEL groups)")
        for g in cpu_groups:
            ignored += [f"instance_group.{f.name}" for f, _ in g.ListFields() if f.name not in ("count", "kind", "name")]
    policy: tuple[str, Any] = ("latest", 1)
    if msg.HasField("version_policy"):
        vp = msg.version_policy
        if vp.HasField("all"):
            policy = ("all", None)
        elif vp.HasField("specific"):
            policy = ("specific", sorted(int(v) for v in vp.specific.versions))
        elif vp.HasField("latest"):
            policy = ("latest", max(1, int(vp.latest.num_versions)))
    for kind, tensors in (("input", msg.input), ("output", msg.output)):
        for t in tensors:
            ignored += [f"{kind}.{f.name}" for f, _ in t.ListFields() if f.name not in ("name", "data_type", "dims")]
    return TritonModelConfig(
        name=msg.name, serve=serve, version_policy=policy,
        model_filename=msg.default_model_filename or "model.onnx",
        inputs=[t.name for t in msg.input], outputs=[t.name for t in msg.output],
        ignored=sorted(set(ignored)),
    )  # fmt: skip
