"""The transport-independent infer core (issue 38 item 3): lookup, counting, decode/encode timing, queueing with
the access record, the status a failure answers with, and the request checks every form shares."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
import pytest

from inferperf.clock import FakeClock
from inferperf.serve.errors import Cancelled, ModelExecutionError, QueueFull, UnknownModel
from inferperf.serve.infer_core import InferCore, failure
from inferperf.serve.protocol import decode_request
from inferperf.serve.request_checks import check_input, request_rows
from inferperf.serve.tensor_types import ProtocolError, TensorSpec

X = TensorSpec("x", "FP32", (-1, 3))
Y = TensorSpec("y", "FP32", (-1, 2))


class _Metrics:
    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.events = clock, []

    def request_started(self, model: str) -> int:
        self.events.append(("started", model))
        return self.clock.now_ns()

    def request_finished(self, model: str, status: int, start_ns: int) -> None:
        self.events.append(("finished", model, status, self.clock.now_ns() - start_ns))

    def decoded(self, model: str, ns: int) -> None:
        self.events.append(("decoded", model, ns))

    def encoded(self, model: str, ns: int) -> None:
        self.events.append(("encoded", model, ns))


class _Model:
    name, version, max_batch_size = "m", "1", 8
    metadata = SimpleNamespace(inputs=[X], outputs=[Y])

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def infer(self, inputs, rows, outputs, is_disconnected=None, timing=None):  # noqa: ANN001, ANN202
        self.calls.append({"rows": rows, "outputs": outputs, "timing": timing is not None})
        if timing is not None:
            timing.update(queue_ms=1.5, compute_ms=2.5)
        return {"y": np.zeros((rows, 2), np.float32)}


def _app() -> SimpleNamespace:
    clock = FakeClock(1_000)
    model = _Model()

    def lookup(name: str, version: str | None = None) -> Any:
        if name != "m":
            raise UnknownModel(f"Request for unknown model: '{name}' is not found")
        return model

    return SimpleNamespace(clock=clock, metrics=_Metrics(clock), last_used={}, lookup=lookup, model=model,
                           log_settings=SimpleNamespace(verbose=0), shm=SimpleNamespace(allowed=False))


def test_a_request_through_the_core_is_counted_timed_and_queued() -> None:
    app = _app()
    core = InferCore(app)
    with pytest.raises(UnknownModel):
        core.open("nope")
    assert app.metrics.events == [] and app.last_used == {}  # a 404 is not counted against any model
    model = core.open("m")
    assert app.last_used == {"m": 1_000}
    call = core.start(model)

    def decode(inputs, outputs, max_batch_size):  # noqa: ANN001, ANN202
        assert (inputs, outputs, max_batch_size) == ([X], [Y], 8)
        app.clock.advance_ns(70)
        return SimpleNamespace(inputs={"x": np.zeros((2, 3), np.float32)}, rows=2, outputs=None)

    req = core.decode(model, decode)
    access: dict[str, Any] = {}
    outputs = asyncio.run(core.run(model, req, None, access))
    assert outputs["y"].shape == (2, 2)
    assert access == {"model": "m", "version": "1", "rows": 2, "queue_ms": 1.5, "compute_ms": 2.5}
    asyncio.run(core.run(model, req))  # nobody logs: the model is not asked for its timing
    assert [c["timing"] for c in model.calls] == [True, False]

    def encode() -> bytes:
        app.clock.advance_ns(30)
        return b"{}"

    assert core.encode(model, encode) == b"{}"
    call.status = 200
    core.finish(call)
    assert app.metrics.events == [("started", "m"), ("decoded", "m", 70), ("encoded", "m", 30),
                                  ("finished", "m", 200, 100)]


def test_a_call_left_unanswered_is_counted_as_500() -> None:
    app = _app()
    core = InferCore(app)
    core.finish(core.start(core.open("m")))
    assert app.metrics.events[-1] == ("finished", "m", 500, 0)


@pytest.mark.parametrize(("error", "answer"), [
    (ProtocolError("input 'x': bad", 400), (400, "input 'x': bad", None)),
    (ProtocolError("too big", 413), (413, "too big", None)),
    (QueueFull("m", 4, retry_after_s=2), (503, "model 'm' queue is full (4 requests waiting): retry later or raise "
                                               "--max-queue-size", 2)),
    (UnknownModel("Request for unknown model: 'q'"), (404, "Request for unknown model: 'q'", None)),
    (Cancelled("m"), (499, "model 'm': request cancelled, the client disconnected while it was queued", None)),
    (ValueError("boom"), (500, "internal error: ValueError: boom", None)),
])
def test_failure_answers_each_error_with_its_status(error: Exception, answer: tuple) -> None:
    assert failure(error) == answer


def test_failure_answers_a_runtime_failure_500_and_lets_cancellation_through() -> None:
    status, message, retry = failure(ModelExecutionError("m", "kernel failed"))
    assert status == 500 and "kernel failed" in message and retry is None
    with pytest.raises(asyncio.CancelledError):
        failure(asyncio.CancelledError())


@pytest.mark.parametrize(("entries", "words"), [
    ([{"name": "z", "datatype": "FP32", "shape": [1, 3], "data": [0, 0, 0]}], "unknown input 'z'"),
    ([{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [0, 0, 0]}] * 2, "input 'x' is given twice"),
    ([{"name": "x", "datatype": "FP32", "shape": [1, -3], "data": [0, 0, 0]}], "negative dim"),
    ([{"name": "x", "datatype": "FP32", "shape": "1x3", "data": [0, 0, 0]}], "list of integers"),
    ([{"name": "x", "datatype": "INT64", "shape": [1, 3], "data": [0, 0, 0]}], "does not match the model's FP32"),
    ([{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}], "does not match the model's [-1, 3]"),
    ([{"name": "x", "datatype": "FP32", "shape": [9, 3], "data": [0] * 27}], "outside 1..max_batch_size (8)"),
])
def test_the_json_form_refuses_through_the_shared_checks(entries: list, words: str) -> None:
    """decode_request (the JSON/binary form) refuses with the words of request_checks, which the next forms
    (gRPC, shared memory) call too."""
    body = orjson.dumps({"inputs": entries})
    with pytest.raises(ProtocolError, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.")):
        decode_request(body, None, [X], [Y], 8)


def test_request_checks_directly() -> None:
    specs = {"x": X, "w": TensorSpec("w", "INT64", (-1,))}
    assert check_input("x", "FP32", [2, 3], specs, {}) == (X, (2, 3))
    with pytest.raises(ProtocolError, match="missing input"):
        request_rows({"x": np.zeros((2, 3))}, list(specs.values()), 8)
    with pytest.raises(ProtocolError, match="disagree"):
        request_rows({"x": np.zeros((2, 3)), "w": np.zeros(3)}, list(specs.values()), 8)
    assert request_rows({"x": np.zeros((2, 3)), "w": np.zeros(2)}, list(specs.values()), 8) == 2
    assert request_rows({"x": np.zeros((2, 3)), "w": np.zeros(2)}, list(specs.values()), 0) == 1


def _endpoint_call(app: SimpleNamespace, body: bytes, send_ns: int) -> list[dict[str, Any]]:
    """One in-process request to the HTTP infer route whose send takes ``send_ns`` of the app's fake clock (a
    client reading slowly, or flow control); returns the messages sent."""
    from inferperf.serve.infer_route import InferEndpoint

    app.model.options = SimpleNamespace(max_body_bytes=1 << 20, json_nonfinite="error")
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the client stays: no disconnect
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            app.clock.advance_ns(send_ns)
        sent.append(message)

    scope = {"type": "http", "path_params": {"model_name": "m"}, "headers": [], "state": {}}
    asyncio.run(InferEndpoint(app)(scope, receive, send))
    return sent


@pytest.mark.parametrize(("inputs", "status", "server_ns"), [
    ([{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [0] * 6}], 200, 5_000_000),
    ([{"name": "x", "datatype": "INT8", "shape": [2, 3], "data": [0] * 6}], 400, 0),
])
def test_the_request_time_ends_when_the_answer_is_handed_to_the_transport(inputs: list, status: int,
                                                                          server_ns: int) -> None:
    """A send that takes 300 ms (a slow reader) is not the server's time: the request's recorded time ends when
    the answer is handed over, so it is the 5 ms the decode took (0 for a request refused in its decode),
    answered or refused (issue 39 item 1)."""
    app = _app()
    clock = app.clock

    real_decoded = app.metrics.decoded

    def decoded(model: str, ns: int) -> None:  # the decode "takes" 5 ms of the fake clock
        clock.advance_ns(5_000_000)
        real_decoded(model, ns)

    app.metrics.decoded = decoded
    sent = _endpoint_call(app, orjson.dumps({"inputs": inputs}), send_ns=300_000_000)
    assert sent[0]["status"] == status and sent[1]["type"] == "http.response.body"
    finished = [e for e in app.metrics.events if e[0] == "finished"]
    assert finished == [("finished", "m", status, server_ns)]
