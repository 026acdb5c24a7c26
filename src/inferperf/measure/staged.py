"""``bench --pre/--post``: user pre- and post-processing timed as their own stages around the model.

The pre function receives one raw item (a file's bytes from ``--pre-input DIR``, or an object yielded by a
generator ``--pre-input module:function``) and returns the model's feeds (a dict input name -> array, or one
array for a one-input model); the post function receives the outputs (a list of arrays in output order).
Each query runs pre -> model -> post in the calling stream, timed with ``perf_counter_ns`` around each part,
so ``metrics.latency_ms`` is end to end and ``metrics.stages`` holds ``pre``, ``model`` and ``post`` with
their own percentiles and share of the end-to-end mean. The raw item is the pooled input, so the bench loop
(warm-up, stop rule, concurrency, sampler) is unchanged. Per-stage samples are the last measured calls
(one per successful query; warm-up calls come first and are dropped).

:func:`resolve_callable` (``module:function`` -> callable) is shared with ``inferperf pipeline``.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import RuntimeFailure, UsageError
from ..stats import latency_summary

_now = time.perf_counter_ns


class PreFailed(RuntimeFailure):
    """The ``--pre`` function raised on an item (counted per query under this kind)."""


class BadFeeds(UsageError):
    """The ``--pre`` function returned feeds the model cannot take (type, names, rank, dtype, fixed dims): exit 2."""


class PostFailed(RuntimeFailure):
    """The ``--post`` function raised on a model's outputs (counted per query under this kind)."""


def resolve_callable(ref: str, base_dir: str | Path, what: str) -> Callable[..., Any]:
    """Import ``module:function`` (``base_dir`` first on ``sys.path``) and return the callable.

    Raises:
        UsageError: not ``module:function``, the module cannot be imported, or it has no such callable.
    """
    mod_name, sep, fn_name = ref.partition(":")
    if not sep or not mod_name or not fn_name:
        raise UsageError(f"{what} {ref!r}: write module:function (e.g. my_stages:decode)")
    base = str(Path(base_dir).resolve())
    if base not in sys.path:
        sys.path.insert(0, base)
    try:
        module = importlib.import_module(mod_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's module
        raise UsageError(f"{what} {ref!r}: cannot import module {mod_name!r} ({type(e).__name__}: {e}): check the"
                         f" name and that it is on the path (the current folder is)") from None
    if not hasattr(module, fn_name):
        raise UsageError(f"{what} {ref!r}: module {mod_name!r} has no function {fn_name!r}")
    fn = getattr(module, fn_name)
    if not callable(fn):
        raise UsageError(f"{what} {ref!r}: {mod_name}.{fn_name} is a {type(fn).__name__}, not a function")
    return fn


def raw_items(pre_input: str, pool_size: int) -> tuple[list[Any], str]:
    """The raw items and their description: a folder's files (bytes, sorted by name, at most ``pool_size``
    x 4) or a generator's first ``pool_size`` items.

    Raises:
        UsageError: a missing or empty folder, a generator that cannot be imported or yields nothing.
    """
    p = Path(pre_input)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file())[: max(1, pool_size * 4)]
        if not files:
            raise UsageError(f"--pre-input {pre_input!r}: the folder holds no files")
        return [f.read_bytes() for f in files], f"files:{p}"
    if ":" not in pre_input or p.exists():
        raise UsageError(f"--pre-input {pre_input!r}: not a folder: pass a folder of files or module:function")
    gen = resolve_callable(pre_input, ".", "--pre-input")
    items = [x for _, x in zip(range(pool_size), iter(gen()))]
    if not items:
        raise UsageError(f"--pre-input {pre_input!r} yielded no items")
    return items, f"generator:{pre_input}"


class Staging:
    """Wraps the runtime call into pre -> model -> post and keeps each part's time (ns) per call.

    Args:
        pre, post: the callables (either may be None); ``pre_ref``/``post_ref`` their ``module:function``.
        items: the raw items (None when there is no pre: the synthetic feeds are used).
        source: where the items came from (recorded as the workload's data source).
    """

    def __init__(self, pre: Callable[[Any], Any] | None, post: Callable[[Any], Any] | None, *,
                 items: list[Any] | None, source: str, pre_ref: str | None, post_ref: str | None) -> None:
        self.pre, self.post, self.items, self.source = pre, post, items, source
        self.refs = {"pre": pre_ref, "post": post_ref}
        self.times: list[tuple[int, int, int]] = []
        self.input_names: list[str] = []
        self.inputs: dict[str, Any] = {}  # input name -> TensorInfo (dtype, declared shape)

    def _feeds(self, raw: Any) -> Any:
        """``pre(raw)`` as the model's feeds (one array -> the only input); its failure as PreFailed."""
        try:
            feeds = self.pre(raw)  # type: ignore[misc]
        except Exception as e:  # noqa: BLE001
            raise PreFailed(f"--pre {self.refs['pre']} raised {type(e).__name__}: {e}") from e
        ref = self.refs["pre"]
        if not isinstance(feeds, dict):
            if len(self.input_names) != 1 or not hasattr(feeds, "shape"):
                raise BadFeeds(f"--pre {ref} returned {type(feeds).__name__}: return a dict of"
                               f" {self.input_names} -> arrays (or one array for a one-input model)")
            feeds = {self.input_names[0]: feeds}
        if set(feeds) != set(self.input_names):
            raise BadFeeds(f"--pre {ref} returned feeds for {sorted(feeds)}: the model's inputs are {self.input_names}")
        for k, v in feeds.items():
            info = self.inputs.get(k)
            if not hasattr(v, "shape") or not hasattr(v, "dtype"):
                raise BadFeeds(f"--pre {ref} returned {type(v).__name__} for input {k!r}: return a numpy array")
            if info is None:
                continue
            if len(v.shape) != len(info.shape):
                raise BadFeeds(f"--pre {ref} returned shape {list(v.shape)} for input {k!r}: it takes a"
                               f" {len(info.shape)}-d array {info.shape}")
            fixed = [(i, d) for i, d in enumerate(info.shape) if isinstance(d, int) and d > 0 and v.shape[i] != d]
            if fixed:
                raise BadFeeds(f"--pre {ref} returned shape {list(v.shape)} for input {k!r}: dim {fixed[0][0]} must be"
                               f" {fixed[0][1]} (the model declares {info.shape})")
            if str(v.dtype) != info.dtype:
                raise BadFeeds(f"--pre {ref} returned {v.dtype} for input {k!r}: the model takes {info.dtype}"
                               f" (convert with .astype(np.{info.dtype}))")
        return feeds

    def wrap(self, run: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """The staged call: ``post(run(pre(raw)))``, each part timed."""
        times, pre, post = self.times, self.pre, self.post

        def staged(raw: Any) -> Any:
            """One query: pre, the runtime call, post, each timed."""
            t0 = _now()
            feeds = self._feeds(raw) if pre is not None else raw
            t1 = _now()
            out = run(feeds)
            t2 = _now()
            if post is not None:
                try:
                    post(out)
                except Exception as e:  # noqa: BLE001
                    raise PostFailed(f"--post {self.refs['post']} raised {type(e).__name__}: {e}") from e
            times.append((t1 - t0, t2 - t1, _now() - t2))
            return out

        return staged

    def backend(self, backend: Any) -> Any:
        """The backend as the scenario sees it: its per-node placement probe gets real feeds (pre applied)."""
        staging = self

        class _View:
            """The backend seen through the staging (attribute access forwarded)."""
            def __getattr__(self, name: str) -> Any:
                """Forward to the backend, except the placement probe (fed by pre) and the async executor (hidden)."""
                if name == "node_placement" and staging.pre is not None and hasattr(backend, name):
                    return lambda feed, force=False: backend.node_placement(staging._feeds(feed), force)
                if name == "async_executor":
                    raise AttributeError(name)  # the staged call must run on the measuring threads
                return getattr(backend, name)

        return _View()

    def stages(self, measured: int) -> dict[str, Any]:
        """``metrics.stages``: pre, model, post (ms summaries over the last ``measured`` calls) and each one's
        share of the end-to-end mean."""
        rows = self.times[-measured:] if measured else []
        if not rows:
            return {}
        total = sum(a + b + c for a, b, c in rows) / len(rows)
        out: dict[str, Any] = {}
        for i, name in enumerate(("pre", "model", "post")):
            if name != "model" and self.refs[name] is None:
                continue
            ns = [r[i] for r in rows]
            out[name] = {"function": self.refs.get(name), "latency_ms": latency_summary(ns),
                         "share_of_mean": (sum(ns) / len(ns)) / total if total else None}
        return out


def make_staging(pre: str | None, post: str | None, pre_input: str | None, pool_size: int) -> Staging:
    """Resolve ``--pre``, ``--post`` and ``--pre-input`` into a :class:`Staging`.

    Raises:
        UsageError: an unimportable function, ``--pre`` without ``--pre-input`` (or the reverse), bad input.
    """
    if pre and not pre_input:
        raise UsageError("--pre needs --pre-input DIR (files passed as bytes) or module:function (a generator)")
    if pre_input and not pre:
        raise UsageError("--pre-input needs --pre module:function (what turns a raw item into the model's feeds)")
    fn_pre = resolve_callable(pre, ".", "--pre") if pre else None
    fn_post = resolve_callable(post, ".", "--post") if post else None
    items, source = raw_items(pre_input, pool_size) if pre_input else (None, "synthetic")
    return Staging(fn_pre, fn_post, items=items, source=source, pre_ref=pre, post_ref=post)


__all__ = ["BadFeeds", "PostFailed", "PreFailed", "Staging", "make_staging", "raw_items", "resolve_callable"]
