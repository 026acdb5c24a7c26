"""Triton's JSON documents: server metadata, model metadata, the model-configuration extension.

Field names and layout follow Triton's HTTP server (``GET /v2``, ``GET
/v2/models/{name}``, ``GET /v2/models/{name}/config``, the JSON form of
``ModelConfig`` in model_config.proto) so tritonclient and perf_analyzer read
them unchanged. perf_analyzer reads ``max_batch_size``, ``input``/``output``
(``dims`` without the batch dim), and ``dynamic_batching``'s presence for the
scheduler type. Sources: triton-inference-server/server
docs/protocol/extension_model_configuration.md, extension_statistics.md;
perf_analyzer src/model_parser.cc.
"""

from __future__ import annotations

from typing import Any

from .._version import __version__
from .tensor_types import TRITON_DATA_TYPE

#: Extensions listed by ``GET /v2``.
#: Triton's protocol extensions served (``model_repository`` is added where a repository is served); not served:
#: ``sequence``, ``schedule_policy``, ``system_shared_memory``, ``cuda_shared_memory``, ``trace``
EXTENSIONS = ["binary_tensor_data", "classification", "logging", "model_configuration", "statistics"]


def server_metadata() -> dict[str, Any]:
    """``GET /v2``: name, version and the protocol extensions served."""
    return {"name": "inferperf", "version": __version__, "extensions": list(EXTENSIONS)}


def _tensors(tensors: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in tensors]


def model_metadata(model: Any) -> dict[str, Any]:
    """``GET /v2/models/{name}``: KServe v2 model metadata (shapes with -1 for free dims, batch dim included)."""
    md = model.metadata
    return {
        "name": model.name,
        "versions": list(md.versions),
        "platform": md.platform,
        "inputs": _tensors(md.inputs),
        "outputs": _tensors(md.outputs),
    }


def _config_tensor(t: Any, batched: bool, is_input: bool, declared: Any = None) -> dict[str, Any]:
    """One ``input`` / ``output`` entry; ``declared`` (a triton_config.TensorConfig) adds the config's
    ``format``, ``reshape`` and ``label_filename``."""
    dims = list(t.shape[1:] if batched else t.shape)
    doc: dict[str, Any] = {"name": t.name, "data_type": TRITON_DATA_TYPE.get(t.datatype, f"TYPE_{t.datatype}")}
    fmt = declared.format if declared is not None else "FORMAT_NONE"
    if is_input:
        doc.update(format=fmt, dims=dims, is_shape_tensor=False, allow_ragged_batch=False, optional=False)
    else:
        doc.update(dims=dims, label_filename=declared.label_filename if declared is not None else "",
                   is_shape_tensor=False)
    if declared is not None and declared.reshape is not None:
        doc["reshape"] = {"shape": list(declared.reshape)}
    return doc


def model_config(model: Any) -> dict[str, Any]:
    """``GET /v2/models/{name}/config``: the JSON form of Triton's ``ModelConfig`` for this model.

    ``dims`` leave out the batch dim when ``max_batch_size`` > 0 (Triton's rule); a repository model's
    ``format``, ``reshape`` and ``label_filename`` are its config.pbtxt's; ``dynamic_batching``
    is present only when dynamic batching is on; ``instance_group`` is one CPU group of ``instance_count``.
    """
    opts = model.options
    batched = model.max_batch_size > 0
    declared = getattr(model, "tensor_config", None) or {}  # a Triton repository model's config.pbtxt tensors
    platform = model.metadata.platform
    doc: dict[str, Any] = {
        "name": model.name,
        "platform": platform,
        "backend": platform.rsplit("_", 1)[0],
        "version_policy": ({"latest": {"num_versions": 1}} if len(model.metadata.versions) <= 1 else
                           {"specific": {"versions": [int(v) if v.isdigit() else v for v in model.metadata.versions]}}),
        "max_batch_size": model.max_batch_size,
        "input": [_config_tensor(t, batched, True, declared.get(t.name)) for t in model.metadata.inputs],
        "output": [_config_tensor(t, batched, False, declared.get(t.name)) for t in model.metadata.outputs],
        "batch_input": [],
        "batch_output": [],
        "instance_group": [
            {
                "name": f"{model.name}_0",
                "kind": "KIND_CPU",
                "count": opts.instance_count,
                "gpus": [],
                "secondary_devices": [],
                "profile": [],
                "passive": False,
                "host_policy": "",
            }
        ],
        "default_model_filename": "model.onnx",
        "parameters": {},
        "model_warmup": [],
        "model_transaction_policy": {"decoupled": False},
    }
    if opts.dynamic_batching and batched:
        doc["dynamic_batching"] = {
            "preferred_batch_size": list(opts.preferred_batch_size),
            "max_queue_delay_microseconds": opts.max_queue_delay_us,
            "preserve_ordering": False,
            "priority_levels": 0,
            "default_priority_level": 0,
            "default_queue_policy": {
                "timeout_action": "REJECT",
                "default_timeout_microseconds": 0,
                "allow_timeout_override": False,
                "max_queue_size": opts.max_queue_size,
            },
        }
    sequences = getattr(model, "sequences", None)
    if sequences is not None:  # sequence_batching replaces dynamic_batching (perf_analyzer reads it: sequence mode)
        doc.pop("dynamic_batching", None)
        doc["sequence_batching"] = sequence_batching(sequences.settings, opts)
    return doc


def sequence_batching(settings: Any, opts: Any) -> dict[str, Any]:
    """The JSON form of Triton's ``ModelSequenceBatching`` for a model's :class:`~.sequences.SequenceSettings`."""
    kinds = {"START": "CONTROL_SEQUENCE_START", "END": "CONTROL_SEQUENCE_END", "READY": "CONTROL_SEQUENCE_READY",
             "CORRID": "CONTROL_SEQUENCE_CORRID"}
    types = {"INT32": "int32_false_true", "FP32": "fp32_false_true", "BOOL": "bool_false_true"}
    controls = []
    for c in settings.controls:
        entry: dict[str, Any] = {"kind": kinds[c.kind]}
        if c.kind == "CORRID":
            entry["data_type"] = "TYPE_STRING" if c.datatype == "BYTES" else f"TYPE_{c.datatype}"
        else:
            entry[types[c.datatype]] = list(c.false_true)
        controls.append({"name": c.name, "control": [entry]})
    doc: dict[str, Any] = {"max_sequence_idle_microseconds": settings.idle_us, "control_input": controls,
                           "state": [{"input_name": st.input_name, "output_name": st.output_name,
                                      "data_type": "TYPE_STRING" if st.datatype == "BYTES" else f"TYPE_{st.datatype}",
                                      "dims": list(st.dims), "initial_state": []} for st in settings.states]}
    if settings.strategy == "oldest":
        doc["oldest"] = {"max_candidate_sequences": settings.max_candidate_sequences,
                         "preferred_batch_size": list(opts.preferred_batch_size),
                         "max_queue_delay_microseconds": opts.max_queue_delay_us}
    else:
        doc["direct"] = {"max_queue_delay_microseconds": opts.max_queue_delay_us}
    return doc


#: Triton's shared-memory extensions' routes (path, verb, summary): system regions served under
#: --allow-client-shm, CUDA's answered as a CPU server answers them
_SHM_ROUTES: tuple[tuple[str, str, str], ...] = (
    ("/v2/systemsharedmemory/status", "get", "System shared-memory regions (--allow-client-shm)"),
    ("/v2/systemsharedmemory/region/{region}/status", "get", "One region's status"),
    ("/v2/systemsharedmemory/region/{region}/register", "post", "Register a region: body {key, offset, byte_size}"),
    ("/v2/systemsharedmemory/unregister", "post", "Unregister every region"),
    ("/v2/systemsharedmemory/region/{region}/unregister", "post", "Unregister a region"),
    ("/v2/cudasharedmemory/status", "get", "CUDA shared memory: none (a CPU server)"),
    ("/v2/cudasharedmemory/region/{region}/status", "get", "CUDA shared memory: none"),
    ("/v2/cudasharedmemory/region/{region}/register", "post", "CUDA shared memory: refused"),
    ("/v2/cudasharedmemory/unregister", "post", "CUDA shared memory: nothing to unregister"),
    ("/v2/cudasharedmemory/region/{region}/unregister", "post", "CUDA shared memory: nothing to unregister"),
)

#: the schemas ``/openapi.json`` refers to: KServe v2's inference request (JSON form) and the error body
_SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
    "InferRequest": {  # KServe v2 inference request (JSON form)
        "type": "object", "required": ["inputs"],
        "properties": {
            "id": {"type": "string"},
            "parameters": {"type": "object"},
            "inputs": {"type": "array", "items": {"$ref": "#/components/schemas/RequestInput"}},
            "outputs": {"type": "array", "items": {"type": "object", "required": ["name"],
                                                   "properties": {"name": {"type": "string"},
                                                                  "parameters": {"type": "object"}}}},
        },
    },
    "RequestInput": {
        "type": "object", "required": ["name", "shape", "datatype", "data"],
        "properties": {
            "name": {"type": "string"},
            "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            "datatype": {"type": "string", "enum": ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8",
                                                     "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"]},
            "parameters": {"type": "object"},
            "data": {"type": "array"},
        },
    },
}


def openapi(model_names: list[str], metrics: bool = True) -> dict[str, Any]:
    """``GET /openapi.json``: an OpenAPI 3.1 description of exactly the routes served (``/metrics`` only
    when ``metrics``: under ``--no-metrics`` it answers 404)."""
    err = {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    ok_json = {"description": "OK", "content": {"application/json": {}}}

    def get(summary: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"get": {"summary": summary, "responses": {"200": ok_json, **(extra or {})}}}

    model = "/v2/models/{model_name}"
    versioned = "/v2/models/{model_name}/versions/{model_version}"
    paths: dict[str, Any] = {
        "/v2": get("Server metadata and extensions"),
        "/v2/health/live": get("Liveness (200 while the process serves; body {\"live\": true})"),
        "/v2/health/ready": get("Readiness (200 once every model is loaded and warmed up; body {\"ready\": bool})",
                                {"503": err}),
        "/v2/models/stats": get("Triton statistics extension, all models"),
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text exposition"}}}},
        "/openapi.json": get("This document"),
        **{path: (get(summary, {"403": err, "404": err}) if verb == "get" else
                  {"post": {"summary": summary, "responses": {"200": ok_json, "400": err, "403": err}}})
           for path, verb, summary in _SHM_ROUTES},
        "/v2/logging": {**get("Triton logging extension: the log settings"),
                        "post": {"summary": "Change log settings (log_info, log_warnings, log_errors, "
                                            "log_verbose_level, log_format); answers every setting",
                                 "responses": {"200": ok_json, "400": err}}},
    }
    if not metrics:
        del paths["/metrics"]
    infer = {
        "post": {
            "summary": "Inference (KServe v2 JSON, or Triton binary tensors with Inference-Header-Content-Length)",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/InferRequest"}},
                                        "application/octet-stream": {}}},
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {}, "application/octet-stream": {}}},
                **{code: err for code in ("400", "404", "413", "500", "503")},
            },
        }
    }
    for base in (model, versioned):
        paths[base] = get("Model metadata", {"404": err})
        paths[f"{base}/ready"] = get("Model readiness (body {\"name\": str, \"ready\": bool})", {"404": err, "503": err})
        paths[f"{base}/config"] = get("Triton model configuration extension", {"404": err})
        paths[f"{base}/stats"] = get("Triton statistics extension", {"404": err})
        paths[f"{base}/infer"] = infer
    repo = {"post": {"summary": "", "responses": {"200": ok_json, "400": err, "404": err}}}
    for path, summary in (("/v2/repository/index", "Model repository index (body: {\"ready\": bool})"),
                          ("/v2/repository/models/{model_name}/load", "Load or reload a model (explicit mode)"),
                          ("/v2/repository/models/{model_name}/unload", "Unload a model (drains it first)")):
        paths[path] = {"post": {**repo["post"], "summary": summary}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "inferperf serve (KServe v2 REST)", "version": __version__, "x-models": model_names},
        "paths": paths,
        "components": {"schemas": _SCHEMAS},
    }
