"""Session config keys that ONNX Runtime defines, for checking ``--session-config KEY=VALUE``.

Source: ``include/onnxruntime/core/session/onnxruntime_session_options_config_keys.h``
in microsoft/onnxruntime: every ``static const char* const kOrt... = "...";`` (and
``kNodePartitionConfigFile`` / ``kDebugLayoutTransformation``) string value, copied
verbatim. The copy read was the newest one the reference index holds: it has
``ep.dynamic.workload_type`` and ``session.resource_cuda_partitioning_settings`` but
not ``session.disable_model_compile`` (the compile API), so it matches the
ORT 1.21 release line. Keys that were renamed or dropped before it (e.g.
``session.enable_quant_qdq``) are not listed.

The installed runtime may be newer (1.32 here) and define more keys (for example
``session.intra_op.spin_duration_us``), and ONNX Runtime accepts any key string
without checking it, so ``is_known_key(k) is False`` means "not in this list":
warn about a possible typo, do not reject the key.
"""

from __future__ import annotations

KNOWN_SESSION_CONFIG_KEYS: frozenset[str] = frozenset(
    {
        # session.*: model formats, allocators, threading
        "session.disable_prepacking",
        "session.use_env_allocators",
        "session.load_model_format",
        "session.save_model_format",
        "session.set_denormal_as_zero",
        "session.use_device_allocator_for_initializers",
        "session.inter_op.allow_spinning",
        "session.intra_op.allow_spinning",
        "session.use_ort_model_bytes_directly",
        "session.use_ort_model_bytes_for_initializers",
        "session.dynamic_block_base",
        "session.force_spinning_stop",
        "session.intra_op_thread_affinities",
        # session.*: quantization / QDQ handling
        "session.disable_quant_qdq",
        "session.disable_double_qdq_remover",
        "session.enable_quant_qdq_cleanup",
        "session.qdqisint8allowed",
        "session.x64quantprecision",
        "session.qdq_matmulnbits_accuracy_level",
        # session.*: graph handling, validation, partitioning, debugging
        "session.disable_aot_function_inlining",
        "session.strict_shape_type_inference",
        "session.allow_released_opsets_only",
        "session.node_partition_config_file",
        "session.debug_layout_transformation",
        "session.disable_cpu_ep_fallback",
        "session.collect_node_memory_stats_to_file",
        "session.resource_cuda_partitioning_settings",
        # session.*: external initializers when saving/loading models
        "session.optimized_model_external_initializers_file_name",
        "session.optimized_model_external_initializers_min_size_in_bytes",
        "session.model_external_initializers_file_folder_path",
        "session.save_external_prepacked_constant_initializers",
        # optimization.*
        "optimization.enable_gelu_approximation",
        "optimization.disable_specified_optimizers",
        "optimization.minimal_build_optimizations",
        "optimization.memory_optimizer_config",  # ENABLE_TRAINING builds only
        "optimization.enable_memory_probe_recompute_config",  # ENABLE_TRAINING builds only
        # mlas.*
        "mlas.enable_gemm_fastmath_arm64_bfloat16",
        # ep.*
        "ep.nnapi.partitioning_stop_ops",
        "ep.context_enable",
        "ep.context_file_path",
        "ep.context_embed_mode",
        "ep.context_node_name_prefix",
        "ep.share_ep_contexts",
        "ep.context_model_external_initializers_file_name",
        "ep.dynamic.workload_type",  # meant for SetEpDynamicOptions, not a regular session option
    }
)
"""Every session config key string in the header named in the module docstring (45 keys)."""


#: Keys newer than the header above, read from the string table of the installed
#: onnxruntime 1.32 shared library (``onnxruntime_pybind11_state.so``); real keys
#: that the header copy predates (the spinning controls matter for thread sweeps).
KEYS_SEEN_IN_ORT_1_32 = frozenset(
    {
        "session.intra_op.spin_duration_us",
        "session.intra_op.spin_backoff_max",
        "session.inter_op.spin_duration_us",
        "session.inter_op.spin_backoff_max",
        "session.disable_model_compile",
        "session.record_ep_graph_assignment_info",
        "optimization.enable_cast_chain_elimination",
        "mlas.use_lut_gemm",
        "mlas.disable_kleidiai",
    }
)


def is_known_key(key: str) -> bool:
    """Whether ``key`` is one of :data:`KNOWN_SESSION_CONFIG_KEYS` (exact, case-sensitive match).

    Args:
        key: a session config key as given to ``SessionOptions.add_session_config_entry``,
            e.g. ``"session.intra_op.allow_spinning"``.

    Returns:
        ``True`` for a key the header defines. ``False`` may still be a valid key
        of a newer ONNX Runtime: treat it as a warning, not an error.
    """
    return key in KNOWN_SESSION_CONFIG_KEYS or key in KEYS_SEEN_IN_ORT_1_32
