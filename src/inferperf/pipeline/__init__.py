"""Pipelines: stages (Python functions or models) joined by bounded queues, measured stage by stage.

``inferperf pipeline FILE.yaml`` (cli/pipeline.py) over :func:`~inferperf.pipeline.run.run_pipeline`:

- :mod:`.spec`: the pipeline file (source, stages, queues) and its checks (one line, exit 2).
- :mod:`.workers`: a stage's call on one item, in a thread or a child process (hand-over timed).
- :mod:`.chain`: the one state machine of queues, workers and source (rules: :mod:`inferperf.policy.pipeline`),
  driven by both executors:
- :mod:`.engine`: the real executor (worker threads, a coordinator on a clock; closed or open loop,
  block/reject queues, deadlines) -> :mod:`.trace`; on a fake clock it equals the simulator item for item;
- :mod:`.simulate`: the same semantics in virtual time (fixed or replayed service times) for tests and
  what-if runs.
- :mod:`.analysis`: utilisation, queues, blocked/starved time, bottleneck, Amdahl over stages, buffer and
  worker advice; :mod:`.result`: the Result (kind ``pipeline``); :mod:`.staged`: ``bench --pre/--post``.
"""
