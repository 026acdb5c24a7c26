"""An OpenAI-compatible target (``--api openai-chat`` / ``openai-completions``): seeded synthetic prompts and the
prebuilt requests the driver cycles through.

Prompts: ``input_pool_size`` prompts whose lengths in tokens are drawn from ``input_distribution``:
``fixed`` (every prompt ``input_tokens``), ``normal`` (mean ``input_tokens``, std ``input_tokens_std``, rounded)
or ``uniform`` (``input_tokens_min`` .. ``input_tokens_max``), clipped to ``[input_tokens_min,
input_tokens_max]``; generator ``numpy.random.default_rng(seed)``. Without ``--tokenizer`` a prompt is that many
whitespace words and its count is **approximate** (the server's tokenizer cuts words into other pieces; its
``usage.prompt_tokens`` is the server's own count, kept beside). With ``--tokenizer PATH`` (a local
``tokenizer.json``; the ``tokenizers`` library, an optional install: nothing is fetched) words are added or
removed until the tokenizer's count is the drawn length (or as near as one word allows), and generated text
is counted with it too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from ..errors import UsageError
from .generation import GenerationTransport, count_words
from .options import LoadConfig
from . import target as _target
from .target import TargetInfo, parse_headers
from .transport import Endpoint, HttpTransport, build_request

#: prompt words (plain, one token each under a whitespace/WordLevel tokenizer).
WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an"
         " they you were her she there one all we their can has more will if would been when who so no time out").split()
PATHS = {"openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions"}


@dataclass
class GenTarget(TargetInfo):
    """A token-stream target: ``api``, ``prompt_tokens`` (client count per payload, same order), ``token_count``
    (``tokenizer`` or ``whitespace words (approximate)``)."""

    api: str = "openai-chat"
    prompt_tokens: list[int] = field(default_factory=list)
    token_count: str = "whitespace words (approximate)"


def token_counter(path: str | None) -> Callable[[str], int]:
    """A text -> token count function: the tokenizer at ``path`` (``tokenizers``), else whitespace words.

    Raises:
        UsageError: ``tokenizers`` not installed, or the file cannot be read as a tokenizer.json.
    """
    if path is None:
        return count_words
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise UsageError("--tokenizer needs the tokenizers library: pip install tokenizers (or drop --tokenizer:"
                         " prompts are then whitespace words, counted approximately)") from None  # fmt: skip
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - any failure to read it is the same usage error
        raise UsageError(f"--tokenizer {path}: not a readable tokenizer.json ({type(e).__name__}): give a local"
                         " file") from None  # fmt: skip
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def prompt_lengths(cfg: LoadConfig) -> list[int]:
    """``input_pool_size`` prompt lengths in tokens (module docstring), seeded by ``cfg.seed``."""
    rng = np.random.default_rng(cfg.seed)
    n, lo = cfg.input_pool_size, cfg.input_tokens_min
    hi = cfg.input_tokens_max or max(lo, cfg.input_tokens * 4)
    if cfg.input_distribution == "normal":
        x = rng.normal(cfg.input_tokens, cfg.input_tokens_std, n)
    elif cfg.input_distribution == "uniform":
        x = rng.integers(lo, hi + 1, n)
    else:
        x = np.full(n, cfg.input_tokens)
    return [int(v) for v in np.clip(np.rint(x), lo, hi)]


def make_prompt(n_tokens: int, rng: np.random.Generator, count: Callable[[str], int]) -> tuple[str, int]:
    """A prompt of ``n_tokens`` by ``count`` (words from :data:`WORDS`), and its count."""
    words = [WORDS[i] for i in rng.integers(0, len(WORDS), n_tokens)]
    text = " ".join(words)
    if count is count_words:
        return text, n_tokens
    for _ in range(64):  # bounded: each pass moves by at least one word
        have = count(text)
        if have == n_tokens or (have > n_tokens and len(words) == 1):
            return text, have
        if have < n_tokens:
            words += [WORDS[i] for i in rng.integers(0, len(WORDS), max(1, (n_tokens - have) // 2))]
        else:
            words = words[: max(1, len(words) - max(1, (have - n_tokens) // 2))]
        text = " ".join(words)
    return text, count(text)


def request_path(cfg: LoadConfig, model: str) -> str:
    """The request path (after the URL's own prefix): ``/v1/...`` or Triton's ``/v2/models/M/generate[_stream]``."""
    if cfg.api == "triton-generate":
        return f"/v2/models/{model}/generate{'_stream' if cfg.stream else ''}"
    return PATHS[cfg.api]


def read_dataset(path: str) -> list[dict[str, Any]]:
    """The rows of a JSONL dataset: ``prompt`` (str), optional ``output_tokens`` (int >= 1, that request's
    ``max_tokens``) and ``timestamp_ms`` (its send offset when replayed with ``--arrival trace:FILE``).

    Raises:
        UsageError: a missing file, or a line that is not such an object (names the file and line).
    """
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--dataset {path}: not found: give a JSONL file of {{\"prompt\": ...}} lines")
    rows = []
    for lineno, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            doc = None
        out = doc.get("output_tokens") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or not isinstance(doc.get("prompt"), str) or \
                (out is not None and (not isinstance(out, int) or isinstance(out, bool) or out < 1)):
            raise UsageError(f"{path}:{lineno}: expected {{\"prompt\": str, \"output_tokens\": int >= 1 (optional)}}")
        rows.append(doc)
    if not rows:
        raise UsageError(f"--dataset {path}: no rows")
    return rows


def request_body(cfg: LoadConfig, model: str, prompt: str) -> bytes:
    """The JSON body of one request (OpenAI: ``stream_options.include_usage`` when streaming; Triton generate:
    ``text_input``, ``max_tokens`` and ``stream`` as inputs, the TensorRT-LLM ensemble's names)."""
    if cfg.api == "triton-generate":
        tdoc: dict[str, Any] = {"text_input": prompt, "stream": cfg.stream}
        if cfg.max_tokens is not None:
            tdoc["max_tokens"] = cfg.max_tokens
        return orjson.dumps(tdoc)
    doc: dict[str, Any] = {"model": model}
    if cfg.api == "openai-chat":
        doc["messages"] = [{"role": "user", "content": prompt}]
    else:
        doc["prompt"] = prompt
    if cfg.max_tokens is not None:
        doc["max_tokens"] = cfg.max_tokens
    if cfg.ignore_eos:
        doc["ignore_eos"] = True
    doc["stream"] = cfg.stream
    if cfg.stream:
        doc["stream_options"] = {"include_usage": True}
    return orjson.dumps(doc)


def _model_name(cfg: LoadConfig, base: str, timeout_s: float) -> str:
    """``--model``, else the first id of ``GET /v1/models``."""
    if cfg.model:
        return cfg.model
    if cfg.api == "triton-generate":
        raise UsageError("--api triton-generate needs --model NAME (the model in /v2/models/NAME/generate_stream)")
    import httpx

    try:
        r = httpx.get(f"{base}/v1/models", timeout=timeout_s, headers=dict(parse_headers(cfg.headers)))
    except httpx.ConnectError as e:  # the cause first: nothing listens there
        raise UsageError(f"cannot connect to {base} ({_reason(e)}): start the server, or fix the URL") from None
    except httpx.HTTPError as e:
        raise UsageError(f"{base}/v1/models: {type(e).__name__} ({_reason(e)}): check the URL and that the server "
                         "is up") from None
    if r.status_code != 200:
        raise UsageError(f"{base}/v1/models answered {r.status_code}: not an OpenAI-compatible server there (--api "
                         f"{cfg.api}); fix the URL, or pass --model NAME if it serves no /v1/models")
    try:
        return str(r.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise UsageError(f"{base}/v1/models listed no model: pass --model NAME") from None


def _reason(e: Exception) -> str:
    """The innermost OS reason of an httpx error (``connection refused``), else its message."""
    text = str(e).lower()
    for cause in ("connection refused", "name or service not known", "timed out", "no route to host"):
        if cause in text:
            return cause
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def read_gen_target(cfg: LoadConfig, timeout_s: float = 10.0) -> GenTarget:
    """Build the prompt pool and requests for ``cfg`` (``api`` openai-*).

    Raises:
        UsageError: no model name (``--model`` or ``/v1/models``), a bad ``--header`` or ``--tokenizer``.
    """
    ep = Endpoint.parse(cfg.url)
    prefix = ep.path.rstrip("/")
    prefix = prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix
    base = f"{ep.scheme}://{ep.host_header}{prefix}"
    model = _model_name(cfg, base, timeout_s)
    count = token_counter(cfg.tokenizer)
    headers = [("Content-Type", "application/json"), ("Accept", "text/event-stream" if cfg.stream else
                                                      "application/json"), *parse_headers(cfg.headers)]  # fmt: skip
    rng = np.random.default_rng(cfg.seed + 1)
    payloads, counts = [], []
    if cfg.dataset is not None:
        prompts = [(row["prompt"], count(row["prompt"]), row.get("output_tokens")) for row in read_dataset(cfg.dataset)]
    else:
        prompts = [(*make_prompt(n, rng, count), None) for n in prompt_lengths(cfg)]
    for text, have, out in prompts:
        row_cfg = cfg if out is None else cfg.model_copy(update={"max_tokens": out})
        payloads.append(build_request(ep, "POST", prefix + request_path(cfg, model), request_body(row_cfg, model, text),
                                      headers))  # fmt: skip
        counts.append(have)
    return GenTarget(kind="openai", url=base, model=model, metadata={"api": cfg.api, "model": model},
                     payloads=payloads, api=cfg.api, prompt_tokens=counts,
                     data_source=f"dataset:{cfg.dataset}" if cfg.dataset else "synthetic",
                     token_count="tokenizer" if cfg.tokenizer else "whitespace words (approximate)")  # fmt: skip


def read_load_target(cfg: LoadConfig) -> TargetInfo:
    """The target of ``cfg``: a token-stream API (:func:`read_gen_target`), a KServe v2 gRPC server (``grpc://``,
    :func:`~.grpc_client.read_grpc_target`) or KServe v2 HTTP / a plain URL (:func:`~.target.read_target`, looked
    up at call time), with their errors."""
    if cfg.api != "kserve":
        return read_gen_target(cfg)
    from .grpc_client import is_grpc, read_grpc_target

    return read_grpc_target(cfg) if is_grpc(cfg.url) else _target.read_target(cfg)


def transport_for(cfg: LoadConfig) -> Any:
    """The transport of a step: ``HttpTransport`` (KServe v2), wrapped to read token streams for ``api`` openai-*,
    or a :class:`~.grpc_client.GrpcTransport` for a ``grpc://`` target."""
    from .grpc_client import GrpcTransport, call_metadata, is_grpc

    if is_grpc(cfg.url):
        return GrpcTransport(cfg.url, cfg.streaming, call_metadata(cfg))
    inner = HttpTransport(cfg.url)
    if cfg.api == "kserve":
        return inner
    return GenerationTransport(inner, cfg.api, cfg.stream, token_counter(cfg.tokenizer))


__all__ = ["GenTarget", "make_prompt", "prompt_lengths", "read_dataset", "read_gen_target", "read_load_target", "request_body",
           "request_path", "token_counter",
           "transport_for"]
