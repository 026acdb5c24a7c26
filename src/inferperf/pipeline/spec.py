"""The pipeline file (YAML): a source, stages joined by bounded queues, and how to check it.

::

    name: ocr
    source:                      # one of: generator (module:function, called with args) or files (a folder)
      generator: ocr_stages:text_images
      args: {count: 8, seed: 0}
    queues: {size: 4, policy: block}   # defaults for the queue in front of every stage
    stages:
      - name: decode
        function: ocr_stages:decode    # item -> item
        workers: 1
        executor: threads              # threads | processes
      - name: det
        model: zoo:ppocr-det           # an ONNX file (relative to this file) or zoo:NAME
        backend: onnxruntime
        session: {intra_op_num_threads: 1}
        input: det_input               # the item key fed to the model (an array: its only input; a dict: feeds)
        output: det_output             # the item key that receives the outputs (a list of arrays)
        queue: {size: 2}               # this stage's input queue (overrides ``queues``)
    check: ocr_stages:check            # optional: final item -> {metric: number}, averaged into metrics.accuracy

Stages run in file order, or as ``after:`` names them; the graph must be one chain (a cycle, an unknown name
or a fork is refused). Module paths resolve with the pipeline file's folder first on ``sys.path``. Every
problem is a :class:`~inferperf.errors.UsageError` naming the field and the fix (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..config import load_mapping
from ..errors import UsageError, first_error
from ..measure.staged import resolve_callable

QueuePolicy = Literal["block", "reject"]
Executor = Literal["threads", "processes"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class QueueSpec(_Spec):
    """A bounded queue: ``size`` items (``None``: unbounded, only on request), ``policy`` when full.

    ``block``: the producer waits (back-pressure upstream, memory flat); ``reject``: the item fails at once
    and is counted as rejected.
    """

    size: int | None = 4
    policy: QueuePolicy = "block"

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() == "unbounded":
            return None
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ValueError(f"queue size {v!r}: use an integer >= 1 (a size of 0 holds nothing) or 'unbounded'")
        return v


class SourceSpec(_Spec):
    """Where items come from: ``generator`` (``module:function``, called with ``args``, yielding items) or
    ``files`` (a folder; each file becomes ``{"name", "path", "bytes"}``), filtered by ``glob``."""

    generator: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    files: str | None = None
    glob: str = "*"


class StageSpec(_Spec):
    """One stage: a Python function (``module:function``, item -> item) or a model (``model`` with its
    ``backend`` and ``session`` settings under ONNX Runtime's names, fed from ``input`` into ``output``).

    ``workers`` parallel workers of kind ``executor``; ``queue`` is the stage's input queue.
    """

    name: str
    function: str | None = None
    model: str | None = None
    backend: str = "onnxruntime"
    session: dict[str, Any] = Field(default_factory=dict)
    input: str | None = None
    output: str | None = None
    workers: int = Field(default=1, ge=1, strict=True)
    executor: Executor = "threads"
    after: str | None = None
    queue: QueueSpec | None = None

    @property
    def kind(self) -> str:
        """``function`` or ``model``."""
        return "model" if self.model else "function"


class PipelineSpec(_Spec):
    """A whole pipeline file; ``base_dir`` is the folder it was read from (module and model paths start there)."""

    name: str = "pipeline"
    source: SourceSpec
    queues: QueueSpec = Field(default_factory=QueueSpec)
    stages: list[StageSpec]
    check: str | None = None
    base_dir: str = "."

    def queue_of(self, stage: StageSpec) -> QueueSpec:
        """The queue in front of ``stage``: its own ``queue`` or the ``queues`` default."""
        return stage.queue or self.queues


def _first_error(e: ValidationError, where: str) -> str:
    kind, loc, msg, _ = first_error(e)
    if kind == "extra_forbidden":
        msg = "unknown field: check its spelling (see docs/pipeline.md)"
    return f"{where}: {loc}: {msg}"


def parse(doc: Any, where: str = "pipeline", base_dir: str | Path = ".") -> PipelineSpec:
    """Validate a pipeline document (a dict, as read from YAML) into a chain of stages.

    Raises:
        UsageError: a missing or unknown field, a bad value, a duplicate or unknown stage name, a cycle,
            a fork, a stage with neither or both of ``function`` and ``model``, a model stage without
            ``input``/``output``, a source with neither or both of ``generator`` and ``files``.
    """
    if not isinstance(doc, dict):
        raise UsageError(f"{where}: expected a mapping with 'source' and 'stages' (see docs/pipeline.md)")
    try:
        spec = PipelineSpec(**doc, base_dir=str(base_dir))
    except ValidationError as e:
        raise UsageError(_first_error(e, where)) from None
    if not spec.stages:
        raise UsageError(f"{where}: 'stages' is empty: list at least one stage")
    src = spec.source
    if (src.generator is None) == (src.files is None):
        raise UsageError(f"{where}: source needs exactly one of 'generator: module:function' or 'files: FOLDER'")
    seen: set[str] = set()
    for i, st in enumerate(spec.stages):
        if not st.name.strip():
            raise UsageError(f"{where}: stage {i + 1} has an empty name")
        if st.name in seen:
            raise UsageError(f"{where}: stage name {st.name!r} is used twice: names must be unique")
        seen.add(st.name)
        if (st.function is None) == (st.model is None):
            raise UsageError(f"{where}: stage {st.name!r} needs exactly one of 'function: module:function' or"
                             f" 'model: FILE.onnx'")
        if st.model and not (st.input and st.output):
            raise UsageError(f"{where}: model stage {st.name!r} needs 'input: KEY' and 'output: KEY' (the item"
                             f" keys it reads its feeds from and writes its outputs to)")
    spec.stages = _chain(spec.stages, where)
    return spec


def _chain(stages: list[StageSpec], where: str) -> list[StageSpec]:
    """Order the stages as one chain from ``after:`` links (default: the stage listed before).

    Raises:
        UsageError: an unknown ``after``, a cycle, a fork (two stages after one), or two first stages.
    """
    names = {s.name for s in stages}
    upstream: dict[str, str | None] = {}
    for i, s in enumerate(stages):
        up = s.after if s.after is not None else (stages[i - 1].name if i else None)
        if up is not None and up not in names:
            raise UsageError(f"{where}: stage {s.name!r} is after unknown stage {up!r}: use one of {sorted(names)}")
        if up == s.name:
            raise UsageError(f"{where}: stage {s.name!r} is after itself: a cycle")
        upstream[s.name] = up
    downstream: dict[str, str] = {}
    for name, up in upstream.items():
        if up is None:
            continue
        if up in downstream:
            raise UsageError(f"{where}: stages {downstream[up]!r} and {name!r} are both after {up!r}: a pipeline"
                             f" is one chain (fan-out is not supported); put one after the other")
        downstream[up] = name
    for start in upstream:  # a walk upstream that meets itself is a cycle
        seen, cur = {start}, upstream[start]
        while cur is not None:
            if cur in seen:
                raise UsageError(f"{where}: stages form a cycle through {cur!r}: check their 'after:' fields")
            seen.add(cur)
            cur = upstream[cur]
    heads = [n for n, up in upstream.items() if up is None]
    if len(heads) != 1:
        raise UsageError(f"{where}: stages {heads} have no upstream: give all but the first an 'after:'")
    by_name = {s.name: s for s in stages}
    order = [heads[0]]
    while order[-1] in downstream:
        order.append(downstream[order[-1]])
    return [by_name[n] for n in order]


def load(path: str | Path) -> PipelineSpec:
    """Read and check a pipeline YAML file (see :func:`parse`).

    Raises:
        UsageError: a missing file, invalid YAML, or any problem :func:`parse` names.
    """
    p = Path(path)
    doc = load_mapping(p, f"pipeline file {str(p)!r}", "a mapping with stages: (see docs/pipeline.md)")
    if "name" not in doc:
        doc = {"name": p.stem, **doc}
    return parse(doc, str(p), p.parent.resolve())


def model_path(ref: str, base_dir: str | Path) -> str:
    """A stage's model: ``zoo:NAME`` as is, a relative file path from the pipeline file's folder."""
    if ref.startswith("zoo:") or Path(ref).is_absolute():
        return ref
    return str((Path(base_dir) / ref).resolve())


__all__ = ["Executor", "PipelineSpec", "QueuePolicy", "QueueSpec", "SourceSpec", "StageSpec", "load",
           "model_path", "parse", "resolve_callable"]
