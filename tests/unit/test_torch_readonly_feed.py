"""``serve --backend torch``: a request's tensors are read-only views of its body (``np.frombuffer``). The torch
runner handed them to ``torch.from_numpy`` as they were: torch warned on the server's stderr ("The given NumPy
array is not writable ... undefined behavior") and a module writing its input in place would write into the
request's bytes. A read-only feed is copied first; a writable one still goes through without a copy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from inferperf.config import SessionOptions

torch = pytest.importorskip("torch")


def test_a_read_only_feed_is_copied_before_torch_sees_it() -> None:
    from inferperf.backends.torch_backend import TorchBackend

    be = TorchBackend(SessionOptions(intra_op_num_threads=1))
    be.load("tests.models:seeded_cnn")
    run = be.runner()
    x = np.linspace(-1, 1, 3 * 32 * 32, dtype=np.float32).reshape(1, 3, 32, 32)
    body = x.tobytes()
    ro = np.frombuffer(body, dtype=np.float32).reshape(1, 3, 32, 32)  # as the server decodes a binary tensor
    assert not ro.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "not writable" UserWarning fails the call
        out = run({"x": ro})
    ref = run({"x": x.copy()})
    assert torch.equal(out, ref) and body == x.tobytes()
