"""Serving: a KServe v2 HTTP server with Triton's extensions, dynamic batching, instances and metrics.

Entry points: :func:`inferperf.serve.server.serving` (library) and ``inferperf serve`` (CLI).
Submodules are imported on use so ``import inferperf`` stays free of the web stack.
"""
