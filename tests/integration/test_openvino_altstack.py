"""OpenVINO's CPU plugin and the main thread's signal stack (inferperf/backends/altstack.py).

The plugin swaps the alternate signal stack of the thread that builds it and, when it dies on another
thread, unmaps that stack without putting the old one back; the next signal on the first thread killed
the process with SIGSEGV (SI_KERNEL) and no faulthandler output: the intermittent crash of this test
suite. Each case runs in a fresh interpreter, because the failure is the death of the process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import requires_extra

SCRIPT = textwrap.dedent('''
    import faulthandler, gc, signal, sys, threading, time
    faulthandler.enable()  # pytest and python -X faulthandler do this: the main thread gets an alt stack
    from inferperf.backends import altstack
    from inferperf.backends.openvino_backend import OpenVinoBackend
    from inferperf.config import SessionOptions

    start = altstack.current()
    backend = OpenVinoBackend(SessionOptions(intra_op_num_threads=1))
    backend.load(sys.argv[1])
    out = backend.fetch({"x": __import__("numpy").ones((2, 32), "float32")})
    assert altstack.current() == start, (start, altstack.current())
    holder = [backend]
    del backend

    def drop():  # the last reference dies on another thread, as it does behind a server's instances
        holder.clear()
        gc.collect()

    t = threading.Thread(target=drop)
    t.start()
    t.join()
    assert altstack.current() == start, (start, altstack.current())
    hits = []
    signal.signal(signal.SIGALRM, lambda s, f: hits.append(s))
    signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)  # a frame on the main thread's alt stack
    time.sleep(0.05)
    print("ok", hits, out[0].shape)
''')


@requires_extra("openvino")
def test_plugin_dying_on_another_thread_leaves_the_main_threads_signal_stack_usable(tmp_path: Path) -> None:
    from tests.models import seeded_mlp_onnx

    model = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(model)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stdout[-1000:]} {proc.stderr[-2000:]}"
    assert proc.stdout.split()[:2] == ["ok", "[14]"]


@pytest.mark.parametrize("before", ["disabled", "small", "large"])
def test_preserve_sigaltstack_restores_or_replaces(before: str) -> None:
    """A block that swaps the thread's alt stack: the old one comes back when it was disabled or at least
    as large; a smaller one is replaced by a module-owned stack of the block's size."""
    script = textwrap.dedent(f'''
        import ctypes
        from inferperf.backends import altstack as a
        bufs = {{}}
        def install(size):
            bufs[size] = ctypes.create_string_buffer(size)
            a._install(ctypes.addressof(bufs[size]), 0, size)
        if "{before}" == "disabled":
            a._install(0, a.SS_DISABLE, 0)
        else:
            install(4096 if "{before}" == "small" else 65536)
        start = a.current()
        with a.preserve_sigaltstack():
            install(16384)  # what a runtime does
        now = a.current()
        if "{before}" == "small":
            assert now[2] == 16384 and now[0] not in (start[0], ctypes.addressof(bufs[16384])), (start, now)
            assert a._KEPT and ctypes.addressof(a._KEPT[-1]) == now[0]
        elif "{before}" == "disabled":
            assert now[1] & a.SS_DISABLE, now
        else:
            assert now == start, (start, now)
        print("ok")
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
