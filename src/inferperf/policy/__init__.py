"""The policy module: pure decision rules shared by a component and its simulator, one copy each.

- :mod:`.batching`: the dynamic batcher's batch formation (Triton's rule), used by ``serve/`` and by
  capacity planning's simulator;
- :mod:`.pipeline`: the pipeline's queue and source rules, used by the real executor
  (:mod:`inferperf.pipeline.engine`) and its discrete-event simulator (:mod:`inferperf.pipeline.simulate`).

Part of the base layer: no clock, no I/O, nothing above the base imported.
"""
