"""A model of a Triton repository served with its ``config.pbtxt``'s wire contract.

Triton's meaning (docs/user_guide/model_configuration.md, "Reshape"; extension_classification.md):

- the client sends and receives each tensor with the config's ``dims`` (after the batch dim when
  ``max_batch_size`` > 0), and that is what the model metadata and configuration report;
- ``input.reshape``: the model is given the input reshaped to ``reshape``; ``output.reshape``: the model
  produces ``reshape`` and the client receives it reshaped to ``dims``;
- ``output.label_filename``: one label per line, the labels of that output's classification results
  (the ``classification`` parameter of a requested output: :mod:`inferperf.serve.classification`);
- ``input.format``: reported in the model configuration (clients such as Triton's image_client read it).

:func:`check_tensors` holds the config against the ONNX file before it is loaded (names, datatypes,
ranks and fixed dims), as Triton's ONNX Runtime backend does; a mismatch refuses the model with the reason.
:class:`TritonServed` wraps a loaded ``ServedModel``: the app sees the config's tensors, the model its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from .paths import confined
from .sequences import SequenceScheduler, SequenceSettings
from .tensor_types import TensorSpec
from .triton_config import TensorConfig


def onnx_io(path: Path) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Inputs (initializers left out) and outputs of an ONNX file: KServe datatype, shape with -1 for free dims.

    Raises:
        UsageError: the file does not parse as ONNX (names it).
    """
    import onnx
    from google.protobuf.message import DecodeError

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except (DecodeError, ValueError, RuntimeError, OSError) as e:
        raise UsageError(f"'{path}' is not a readable ONNX model ({type(e).__name__}): check the file") from None
    inits = {t.name for t in graph.initializer}

    def spec(v: Any) -> TensorSpec:
        tt = v.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type) if tt.elem_type else np.dtype(object)
        from .model import KSERVE_DATATYPE

        datatype = KSERVE_DATATYPE.get(np.dtype(dtype).name, np.dtype(dtype).name.upper())
        shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim)
        return TensorSpec(v.name, datatype, shape)

    return [spec(v) for v in graph.input if v.name not in inits], [spec(v) for v in graph.output]


def _fits(model_shape: Sequence[int], want: Sequence[int]) -> bool:
    return len(model_shape) == len(want) and all(a == b or a == -1 or b == -1 for a, b in zip(model_shape, want, strict=True))


def check_tensors(name: str, version: str, path: Path, max_batch_size: int, inputs: Sequence[TensorConfig],
                  outputs: Sequence[TensorConfig]) -> tuple[dict[str, list[int]], list[str]]:  # fmt: skip
    """Hold the config's tensors against the ONNX file; return warm-up shapes for the inputs the config fixes.

    Returns:
        (shapes, strings): input name -> full shape (batch dim 1 first when ``max_batch_size`` > 0) for each
        declared input whose model-side dims (``reshape`` or ``dims``) are all fixed, the ``--shape`` values
        for the warm-up; and the model's string (BYTES) inputs.

    Raises:
        UsageError: a name the model does not have, another datatype, or dims that cannot be the model's
            (the message names the tensor, both shapes and the fix).
    """
    have_in, have_out = onnx_io(path)
    lead = (-1,) if max_batch_size > 0 else ()
    shapes: dict[str, list[int]] = {}
    for kind, declared, have in (("input", inputs, have_in), ("output", outputs, have_out)):
        by_name = {t.name: t for t in have}
        for t in declared:
            m = by_name.get(t.name)
            where = f"model '{name}' version {version}: config.pbtxt {kind} '{t.name}'"
            if m is None:
                raise UsageError(f"{where} is not in the model, whose {kind}s are {sorted(by_name)}")
            if m.datatype != t.datatype:
                raise UsageError(f"{where} is {t.datatype}, the model's is {m.datatype}: fix data_type")
            inner = t.reshape if t.reshape is not None else t.dims
            if not _fits(m.shape, lead + inner):
                what = "reshape" if t.reshape is not None else "dims"
                batch = " (after the batch dim: max_batch_size > 0)" if lead else ""
                raise UsageError(f"{where}: {what} {list(inner)}{batch} cannot be the model's shape {list(m.shape)}:"
                                 f" fix {what} or max_batch_size")
            if kind == "input" and -1 not in inner:
                shapes[t.name] = [1, *inner] if lead else list(inner)
    return shapes, [t.name for t in have_in if t.datatype == "BYTES"]


def read_labels(folder: Path, outputs: Sequence[TensorConfig], root: Path) -> dict[str, tuple[str, ...]]:
    """Each output's labels (``label_filename`` in the model folder, one per line, as Triton reads them).

    Raises:
        UsageError: a label file missing, unreadable, or outside the repository.
    """
    labels = {}
    for t in outputs:
        if not t.label_filename:
            continue
        path = confined(root, folder / t.label_filename, f"output '{t.name}' label_filename")
        try:
            labels[t.name] = tuple(path.read_text().splitlines())
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"output '{t.name}' label_filename '{path}' cannot be read ({e}): put the file in"
                             f" the model folder {folder}") from None
    return labels


def check_sequence_io(name: str, settings: SequenceSettings, metadata: Any, batched: bool) -> None:
    """Hold ``sequence_batching``'s control inputs and implicit state against the loaded model (as Triton's
    sequence batcher does at load): each control input is a model input of its datatype (CORRID's
    ``data_type``), each state's ``input_name`` / ``output_name`` a model input / output of its datatype with its
    dims after the batch dim.

    Raises:
        UsageError: the first mismatch, naming the config field and the model's tensor.
    """
    ins, outs = {t.name: t for t in metadata.inputs}, {t.name: t for t in metadata.outputs}
    lead = 1 if batched else 0
    where = f"model '{name}': config.pbtxt sequence_batching"
    for c in settings.controls:
        t = ins.get(c.name)
        if t is None:
            raise UsageError(f"{where} control_input '{c.name}' is not an input of the model {sorted(ins)}")
        if t.datatype != c.datatype:
            raise UsageError(f"{where} control_input '{c.name}' is {c.datatype}, the model's input is {t.datatype}:"
                             " fix its *_false_true (or data_type for CORRID)")
    for st in settings.states:
        for kind, tname, have in (("input_name", st.input_name, ins), ("output_name", st.output_name, outs)):
            t = have.get(tname)
            if t is None:
                raise UsageError(f"{where} state {kind} '{tname}' is not an {kind[:-5]} of the model {sorted(have)}")
            if t.datatype != st.datatype or not _fits(t.shape[lead:], st.dims):
                raise UsageError(f"{where} state {kind} '{tname}' is {st.datatype} {list(st.dims)}, the model's is "
                                 f"{t.datatype} {list(t.shape[lead:])}: fix the state's data_type or dims")


class TritonServed:
    """A ``ServedModel`` as its ``config.pbtxt`` presents it (see the module docstring).

    ``metadata`` lists the declared tensors with the config's datatype and dims (batch dim -1 first when
    ``max_batch_size`` > 0), outputs with their labels; ``tensor_config`` (name -> TensorConfig) feeds the
    model-configuration document. Everything else is the wrapped model's.
    """

    def __init__(self, inner: Any, inputs: Sequence[TensorConfig], outputs: Sequence[TensorConfig],
                 labels: dict[str, tuple[str, ...]], sequence: SequenceSettings | None = None) -> None:  # fmt: skip
        self._inner = inner
        self._lead: tuple[int, ...] = (-1,) if inner.max_batch_size > 0 else ()
        self.tensor_config = {t.name: t for t in (*inputs, *outputs)}
        self._in_shape = {t.name: t.reshape for t in inputs if t.reshape is not None}
        self._out_shape = {t.name: t.dims for t in outputs if t.reshape is not None}

        def view(specs: Sequence[TensorSpec]) -> tuple[TensorSpec, ...]:
            out = []
            for s in specs:
                t = self.tensor_config.get(s.name)
                spec = s if t is None else TensorSpec(s.name, t.datatype, self._lead + t.dims)
                out.append(dataclasses.replace(spec, labels=labels.get(s.name)))
            return tuple(out)

        md = inner.metadata
        if sequence is not None:
            check_sequence_io(inner.name, sequence, md, inner.max_batch_size > 0)
        hidden_in = sequence.hidden_inputs if sequence else frozenset()
        hidden_out = sequence.hidden_outputs if sequence else frozenset()
        self.metadata = dataclasses.replace(md, inputs=view([t for t in md.inputs if t.name not in hidden_in]),
                                            outputs=view([t for t in md.outputs if t.name not in hidden_out]))
        #: the model's sequences (``sequence_batching``), None for a model of independent requests
        self.sequences: SequenceScheduler | None = None
        if sequence is not None:
            o = inner.options
            direct, rows = sequence.strategy == "direct", max(1, inner.max_batch_size)
            if direct and o.instance_count > 1:
                inner.pin_instances()  # a direct sequence runs on its slot's instance
            self.sequences = SequenceScheduler(self._run, inner.name, sequence,
                                               o.instance_count * rows if direct else sequence.max_candidate_sequences,
                                               inner.max_batch_size > 0, inner._clock, None,
                                               rows if direct and o.instance_count > 1 else 0)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    @property
    def _observer(self) -> Any:  # the wrapped model's: muting the wrapper (serve.warmup.muted) mutes the model
        return self._inner._observer

    @_observer.setter
    def _observer(self, value: Any) -> None:
        self._inner._observer = value

    @property
    def warmup_feeds(self) -> list[dict[str, Any]]:
        """The model's warm-up feeds as a client sends them: declared inputs shaped to the config's dims (none
        for a sequence model: its requests need a sequence; ``ServedModel.load`` warmed its instances)."""
        if self.sequences is not None:
            return []
        dims = {n: self.tensor_config[n].dims for n in self._in_shape}
        out = []
        for feed in self._inner.warmup_feeds:
            rows = next(iter(feed.values())).shape[0] if self._lead else 1
            out.append(self._reshape({n: np.asarray(a) for n, a in feed.items()}, dims, rows))
        return out

    def _reshape(self, arrays: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], rows: int) -> dict[str, np.ndarray]:
        lead = (rows,) if self._lead else ()
        return {n: (a.reshape(lead + shapes[n]) if n in shapes else a) for n, a in arrays.items()}

    async def infer(self, inputs: dict[str, np.ndarray], rows: int, requested_outputs: list[str] | None = None,
                    is_disconnected: Callable[[], Awaitable[bool]] | None = None, sequence: Any = None,
                    **kw: Any) -> dict[str, np.ndarray]:
        """``ServedModel.infer`` with inputs reshaped to what the model takes and outputs to the config's dims;
        a sequence model's request through its :class:`~.sequences.SequenceScheduler` (``sequence``: the
        request's :class:`~.sequences.SequenceParams`, None when it names none).

        Raises:
            SequenceError: a request the sequence rules refuse (400); as ``ServedModel.infer``.
        """
        if self.sequences is None:
            return await self._run(inputs, rows, requested_outputs, is_disconnected, **kw)
        return await self.sequences.infer(inputs, rows, requested_outputs, is_disconnected, sequence, **kw)

    async def _run(self, inputs: dict[str, np.ndarray], rows: int, requested_outputs: list[str] | None = None,
                   is_disconnected: Callable[[], Awaitable[bool]] | None = None, **kw: Any) -> dict[str, np.ndarray]:
        outs = await self._inner.infer(self._reshape(inputs, self._in_shape, rows), rows, requested_outputs,
                                       is_disconnected, **kw)
        return self._reshape(outs, self._out_shape, rows)
