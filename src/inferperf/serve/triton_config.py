"""Triton's ``config.pbtxt``: read with protobuf's ``text_format`` into Triton's own ``ModelConfig`` message.

The message types come from ``workload/model_config.descriptor.txtpb`` (:mod:`inferperf.workload.triton_protos`): protoc's
FileDescriptorProto of Triton's ``model_config.proto`` (triton-inference-server/common; the commit, the
licence and the command that remakes it are in its header), so every valid Triton config parses, lists of
messages, maps, enums and comments included, and a field Triton does not know is an error as in Triton.
tritonclient's generated module is not used: its package needs grpcio and pins protobuf < 4, which onnx
cannot share. No hand-written pbtxt parsing.

What a config asks for falls in three groups:

- mapped: ``max_batch_size``; ``dynamic_batching { max_queue_delay_microseconds, preferred_batch_size,
  default_queue_policy { max_queue_size, default_timeout_microseconds (with timeout_action REJECT, rounded
  up to ms) } }``; ``instance_group { count }`` (summed over CPU / AUTO groups); ``version_policy``
  (``latest { num_versions }``, default 1; ``all``; ``specific { versions }``); ``default_model_filename``
  (default ``model.onnx``); ``platform`` / ``backend`` (ONNX Runtime); and the wire contract of each
  ``input`` / ``output``: ``name``, ``data_type``, ``dims``, ``reshape`` (the client sends and receives
  ``dims``, the model sees ``reshape``), ``input.format`` (reported in the model configuration; NHWC/NCHW
  need 3 dims), ``output.label_filename`` (labels of the classification extension); ``sequence_batching``
  (direct or oldest, control inputs, implicit state with zero initial state, the idle timeout: :mod:`.sequences`).
- refused (:class:`TritonConfigError` naming each reason; the model is UNAVAILABLE): what inferperf does not
  do: ensembles (``platform: "ensemble"``, ``ensemble_scheduling``), other backends
  (``python``, TensorRT ...), ``batch_input`` / ``batch_output``, decoupled models, shape tensors,
  ``optional`` inputs, non-linear-format I/O, only GPU instance groups, and configs Triton itself refuses
  (Triton's checks of ``ValidateIOShape``, core src/model_config_utils.cc).
- ignored with a warning (they do not change what a client sends or receives): ``optimization``,
  ``parameters``, ``model_warmup``, ``response_cache``, queue priorities, ``preserve_ordering`` ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .sequences import DEFAULT_IDLE_US, Control, SequenceSettings, State


#: Triton ``data_type`` -> KServe v2 datatype.
DATATYPE = {"TYPE_BOOL": "BOOL", "TYPE_UINT8": "UINT8", "TYPE_UINT16": "UINT16", "TYPE_UINT32": "UINT32",
            "TYPE_UINT64": "UINT64", "TYPE_INT8": "INT8", "TYPE_INT16": "INT16", "TYPE_INT32": "INT32",
            "TYPE_INT64": "INT64", "TYPE_FP16": "FP16", "TYPE_FP32": "FP32", "TYPE_FP64": "FP64",
            "TYPE_STRING": "BYTES", "TYPE_BF16": "BF16"}  # fmt: skip
_ONNX = {"onnxruntime_onnx", "onnxruntime"}
#: ModelConfig fields that do not change the wire contract: set, they are named in a warning.
_IGNORED_TOP = {"optimization", "parameters", "model_warmup", "cc_model_filenames", "metric_tags", "model_operations",
                "model_repository_agents", "response_cache", "model_metrics", "runtime"}  # fmt: skip
_MAPPED_BATCHING = {"max_queue_delay_microseconds", "preferred_batch_size", "default_queue_policy"}


class TritonConfigError(ValueError):
    """A ``config.pbtxt`` that does not parse, or asks for what inferperf cannot serve (the message names it)."""


def message_class() -> Any:
    """The ``inference.ModelConfig`` message class, built once from the vendored descriptor
    (:mod:`inferperf.workload.triton_protos`)."""
    from ..workload.triton_protos import message

    return message("inference.ModelConfig")


@dataclass(frozen=True)
class TensorConfig:
    """One ``input`` / ``output`` entry: ``datatype`` is KServe's (``FP32``, ``BYTES`` ...); ``dims`` leave
    out the batch dim when ``max_batch_size`` > 0 (-1 = any); ``reshape``: the dims the model sees (None =
    ``dims``); ``format``: ``FORMAT_NONE`` / ``FORMAT_NHWC`` / ``FORMAT_NCHW``; ``label_filename``: a file of
    the model folder, one label per line (outputs only, "" = none)."""

    name: str
    datatype: str
    dims: tuple[int, ...]
    reshape: tuple[int, ...] | None = None
    format: str = "FORMAT_NONE"
    label_filename: str = ""


@dataclass
class TritonModelConfig:
    """What inferperf takes from one ``config.pbtxt``.

    ``serve``: ServeOptions fields (``max_batch_size``, ``dynamic_batching``, ``max_queue_delay_us``,
    ``preferred_batch_size``, ``max_queue_size``, ``instance_count``, ``request_timeout_ms``);
    ``version_policy``: ``("latest", N)``, ``("all", None)`` or ``("specific", [versions])``;
    ``inputs`` / ``outputs``: the tensors the config lists; ``ignored``: dotted names of the fields set but
    not mapped (they do not change the wire contract); ``sequence``: its ``sequence_batching``
    (:mod:`.sequences`), None without.
    """

    name: str
    serve: dict[str, Any]
    version_policy: tuple[str, Any]
    model_filename: str
    inputs: list[TensorConfig] = field(default_factory=list)
    outputs: list[TensorConfig] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    sequence: SequenceSettings | None = None


def parse(text: str, where: str = "config.pbtxt") -> TritonModelConfig:
    """Parse a Triton ``config.pbtxt`` and map it (see the module docstring).

    Raises:
        TritonConfigError: not valid text-format protobuf for Triton's ModelConfig, a config Triton refuses,
            or one asking for what inferperf does not do (the message starts with ``where`` and names each
            reason).
    """
    from google.protobuf import text_format

    msg = message_class()()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as e:
        raise TritonConfigError(f"{where}: not a Triton model configuration ({e})") from None
    refused: list[str] = []
    ignored = [f.name for f, _ in msg.ListFields() if f.name in _IGNORED_TOP]
    _refusals(msg, refused)
    if msg.max_batch_size < 0:
        refused.append(f"max_batch_size {msg.max_batch_size} is negative")
    serve: dict[str, Any] = {"max_batch_size": max(0, msg.max_batch_size)}
    _batching(msg, serve, ignored)
    _instances(msg, serve, ignored, refused)
    inputs = [_tensor(t, "input", msg.max_batch_size, refused, ignored) for t in msg.input]
    outputs = [_tensor(t, "output", msg.max_batch_size, refused, ignored) for t in msg.output]
    sequence = _sequence(msg, serve, refused, ignored) if msg.HasField("sequence_batching") else None  # (a oneof
    # with dynamic_batching in ModelConfig: the parser refuses both at once)
    if refused:
        raise TritonConfigError(f"{where}: inferperf cannot serve this model: {'; '.join(dict.fromkeys(refused))}")
    return TritonModelConfig(
        name=msg.name, serve=serve, version_policy=_version_policy(msg),
        model_filename=msg.default_model_filename or "model.onnx", inputs=inputs, outputs=outputs,
        ignored=sorted(set(ignored)), sequence=sequence,
    )  # fmt: skip


def _refusals(msg: Any, refused: list[str]) -> None:
    """What the whole model asks for that inferperf does not do."""
    platform = msg.backend or msg.platform
    if platform == "ensemble" or msg.HasField("ensemble_scheduling"):
        refused.append("an ensemble (platform 'ensemble' / ensemble_scheduling): inferperf serves single ONNX"
                       " models; serve the ensemble's steps as models of their own")
    elif platform == "python":
        refused.append("the python backend (model.py): inferperf serves ONNX models through ONNX Runtime")
    elif platform and platform not in _ONNX:
        refused.append(f"platform/backend '{platform}' is not ONNX Runtime: inferperf serves ONNX models"
                       " (onnxruntime_onnx)")
    if msg.batch_input or msg.batch_output:
        refused.append("batch_input / batch_output (tensors the batcher makes or splits): not supported")
    if msg.HasField("model_transaction_policy") and msg.model_transaction_policy.decoupled:
        refused.append("model_transaction_policy { decoupled: true } (many responses per request): not supported")


def _batching(msg: Any, serve: dict[str, Any], ignored: list[str]) -> None:
    if not msg.HasField("dynamic_batching"):
        return
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
        ignored += [f"dynamic_batching.default_queue_policy.{f.name}" for f, _ in qp.ListFields() if f.name not in mapped]
    ignored += [f"dynamic_batching.{f.name}" for f, _ in db.ListFields() if f.name not in _MAPPED_BATCHING]


_CONTROL_KINDS = {"CONTROL_SEQUENCE_START": "START", "CONTROL_SEQUENCE_END": "END",
                  "CONTROL_SEQUENCE_READY": "READY", "CONTROL_SEQUENCE_CORRID": "CORRID"}
_CORRID_TYPES = ("UINT64", "INT64", "UINT32", "INT32", "BYTES")


def _enum(m: Any, field_name: str) -> str:
    return m.DESCRIPTOR.fields_by_name[field_name].enum_type.values_by_number[getattr(m, field_name)].name


def _sequence(msg: Any, serve: dict[str, Any], refused: list[str], ignored: list[str]) -> SequenceSettings:
    """``sequence_batching``: strategy, idle timeout, control inputs and implicit state (model_config.proto's
    ``ModelSequenceBatching``), checked as Triton's ValidateModelConfig does for what it maps; the requests of
    different sequences are batched by the dynamic batcher with the strategy's ``max_queue_delay_microseconds``
    (and oldest's ``preferred_batch_size``)."""
    sb = msg.sequence_batching
    controls = []
    for ci in sb.control_input:
        for c in ci.control:
            kind = _CONTROL_KINDS.get(_enum(c, "kind"))
            where = f"sequence_batching control_input '{ci.name}'"
            if kind is None:
                refused.append(f"{where}: control kind {_enum(c, 'kind')} is not served (START, END, READY, CORRID)")
                continue
            if kind == "CORRID":
                datatype = DATATYPE.get(_enum(c, "data_type"), "")
                if datatype not in _CORRID_TYPES:
                    refused.append(f"{where}: CORRID data_type must be TYPE_UINT64, TYPE_INT64, TYPE_UINT32, "
                                   "TYPE_INT32 or TYPE_STRING")
                controls.append(Control(ci.name, kind, datatype))
                continue
            pairs = [("INT32", tuple(c.int32_false_true)), ("FP32", tuple(c.fp32_false_true)),
                     ("BOOL", tuple(c.bool_false_true))]
            given = [(dt, v) for dt, v in pairs if v]
            if len(given) != 1 or len(given[0][1]) != 2:
                refused.append(f"{where}: {kind} needs exactly one of int32_false_true, fp32_false_true, "
                               "bool_false_true with two values")
                continue
            controls.append(Control(ci.name, kind, given[0][0], given[0][1]))
    states = []
    for st in sb.state:
        datatype = DATATYPE.get(_enum(st, "data_type"), "")
        dims = tuple(int(d) for d in st.dims)
        if not st.input_name or not st.output_name or not datatype or any(d < 1 for d in dims):
            refused.append(f"sequence_batching state '{st.input_name}': needs input_name, output_name, data_type and"
                           " fixed dims")
        if any(i.data_type or i.HasField("data_file") for i in st.initial_state if i.WhichOneof("state_data") != "zero_data"):
            refused.append(f"sequence_batching state '{st.input_name}': initial_state other than zero_data is not "
                           "served")
        states.append(State(st.input_name, st.output_name, datatype, dims))
    strategy, candidates = "direct", 0
    serve["dynamic_batching"] = msg.max_batch_size > 0
    if sb.HasField("oldest"):
        strategy, candidates = "oldest", int(sb.oldest.max_candidate_sequences)
        serve["max_queue_delay_us"] = int(sb.oldest.max_queue_delay_microseconds)
        serve["preferred_batch_size"] = list(sb.oldest.preferred_batch_size)
        ignored += [f"sequence_batching.oldest.{f.name}" for f, _ in sb.oldest.ListFields() if f.name not in
                    ("max_candidate_sequences", "max_queue_delay_microseconds", "preferred_batch_size")]
    elif sb.HasField("direct"):
        serve["max_queue_delay_us"] = int(sb.direct.max_queue_delay_microseconds)
        ignored += [f"sequence_batching.direct.{f.name}" for f, _ in sb.direct.ListFields()
                    if f.name != "max_queue_delay_microseconds"]
    if strategy == "oldest" and candidates < 1:
        refused.append("sequence_batching.oldest.max_candidate_sequences must be >= 1")
    ignored += [f"sequence_batching.{f.name}" for f, _ in sb.ListFields()
                if f.name not in ("control_input", "state", "oldest", "direct", "max_sequence_idle_microseconds")]
    return SequenceSettings(strategy, int(sb.max_sequence_idle_microseconds) or DEFAULT_IDLE_US, tuple(controls),
                            tuple(states), candidates)


def _instances(msg: Any, serve: dict[str, Any], ignored: list[str], refused: list[str]) -> None:
    if not msg.instance_group:
        return
    cpu_groups = [g for g in msg.instance_group if g.kind in (0, 2)]  # KIND_AUTO, KIND_CPU
    if not cpu_groups:
        refused.append("every instance_group is KIND_GPU/KIND_MODEL: give one KIND_CPU group")
        return
    if any(g.count < 0 for g in cpu_groups):
        refused.append("instance_group count must be >= 0")
        return
    serve["instance_count"] = max(1, sum(g.count or 1 for g in cpu_groups))
    if len(cpu_groups) < len(msg.instance_group):
        ignored.append("instance_group (KIND_GPU/KIND_MODEL groups)")
    for g in cpu_groups:
        ignored += [f"instance_group.{f.name}" for f, _ in g.ListFields() if f.name not in ("count", "kind", "name")]


def _version_policy(msg: Any) -> tuple[str, Any]:
    if msg.HasField("version_policy"):
        vp = msg.version_policy
        if vp.HasField("all"):
            return ("all", None)
        if vp.HasField("specific"):
            return ("specific", sorted(int(v) for v in vp.specific.versions))
        if vp.HasField("latest"):
            return ("latest", max(1, int(vp.latest.num_versions)))
    return ("latest", 1)


def _tensor(t: Any, kind: str, max_batch_size: int, refused: list[str], ignored: list[str]) -> TensorConfig:
    """One input/output, checked as Triton's ValidateIOShape and ValidateModelInput do."""
    what = f"{kind} '{t.name}'"
    if not t.name:
        refused.append(f"an {kind} without a name (Triton: must specify 'name')")
    if t.data_type == 0:
        refused.append(f"{what} must specify 'data_type'")
    dims = tuple(int(d) for d in t.dims)
    if not dims:
        refused.append(f"{what} must specify 'dims'")
    reshape = tuple(int(d) for d in t.reshape.shape) if t.HasField("reshape") else None
    for label, shape in (("dims", dims), ("reshape", reshape or ())):
        if any(d < 1 and d != -1 for d in shape):
            refused.append(f"{what} {label} {list(shape)}: each dim must be >= 1, or -1 for a variable-size dim")
    if reshape is not None:
        if reshape == () and max_batch_size == 0:
            refused.append(f"{what} cannot have an empty reshape for a non-batching model (scalar tensors)")
        elif not _same_size(dims, reshape):
            refused.append(f"{what} has different size for dims {list(dims)} and reshape {list(reshape)}")
        elif reshape.count(-1) > 1 or dims.count(-1) > 1:
            refused.append(f"{what} reshapes {list(dims)} <-> {list(reshape)}: inferperf reshapes tensors with at most"
                           " one variable-size dim")
    name = t.DESCRIPTOR.fields_by_name["data_type"].enum_type.values_by_number[t.data_type].name
    if name not in DATATYPE and t.data_type != 0:
        refused.append(f"{what} data_type {name} has no KServe v2 datatype")
    if t.is_shape_tensor:
        refused.append(f"{what} is a shape tensor (Triton: shape tensors are only supported for TensorRT)")
    if t.is_non_linear_format_io:
        refused.append(f"{what} is non-linear-format I/O (TensorRT only)")
    fmt = "FORMAT_NONE"
    if kind == "input":
        fmt = t.DESCRIPTOR.fields_by_name["format"].enum_type.values_by_number[t.format].name
        if fmt != "FORMAT_NONE" and len(dims) != 3:
            refused.append(f"{what} {fmt} needs 3 dims, has {list(dims)} (Triton: model input NHWC/NCHW require 3 dims)")
        if t.optional:
            refused.append(f"{what} is optional (a client may leave it out): inferperf needs every input")
        if t.allow_ragged_batch:
            ignored.append("input.allow_ragged_batch")
    return TensorConfig(t.name, DATATYPE.get(name, name), dims, reshape, fmt,
                        t.label_filename if kind == "output" else "")


def _same_size(dims: tuple[int, ...], reshape: tuple[int, ...]) -> bool:
    """Triton's rule: equal element counts, or (with variable-size dims) equal counts of each run of fixed
    dims between them; an empty reshape matches dims of one element."""
    if reshape == ():
        return all(d == 1 for d in dims)

    def runs(shape: tuple[int, ...]) -> list[int]:
        out, n = [], 1
        for d in shape:
            if d == -1:
                out.append(n)
                n = 1
            else:
                n *= d
        return [*out, n]

    return runs(dims) == runs(reshape)
