"""Load-time overrides of a repository model, as Triton's model-repository extension defines them: a ``config``
parameter (the model configuration as JSON, Triton's ``ModelConfig`` message) used instead of the folder's
``config.pbtxt``, and ``file:<path>`` parameters (the bytes of each file of the model folder, e.g.
``file:1/model.onnx``) that make the whole folder, which then needs a ``config`` too.

The override replaces the configuration; it is not merged into the folder's (Triton: "This config will be used
for loading the model instead of the one in the model directory"); fields it leaves out take their defaults,
and the tensors are completed from the model, as Triton's auto-complete does for ONNX models.

A config override is read in place of the folder's ``config.pbtxt`` (:func:`config_text`, then
:func:`~inferperf.serve.repository.read_model`); it applies to Triton-layout models. File overrides are written
with their config into a staging repository (:class:`Staged`), read the same way, which lives until the model
is loaded again or unloaded.

Refusals, each ``failed to load 'NAME': ...`` as Triton words them: a config that is not JSON or not a
``ModelConfig`` (400), file overrides without a config (400), a file path that leaves the model folder (400), a
file the OS cannot write, e.g. a name over NAME_MAX (500: Triton's "failed to poll from model repository").

Sources: triton-inference-server/server ``docs/protocol/extension_model_repository.md`` (the ``config`` and
``file:`` parameters); Triton's client example ``simple_grpc_model_control.py`` / ``simple_http_model_control.py``.
"""

from __future__ import annotations

import base64
import binascii
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import ControlError

#: the parameter prefix of a file override
FILE_PREFIX = "file:"


@dataclass
class Override:
    """A load request's overrides: ``config`` (JSON text, or None) and ``files`` (path in the model folder ->
    bytes)."""

    config: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.config is not None or bool(self.files)


def _fail(name: str, why: str, status: int = 400) -> ControlError:
    return ControlError(f"failed to load '{name}': {why}", status)


def from_http(name: str, body: Any) -> Override:
    """The overrides of an HTTP load request's JSON body (``{"parameters": {"config": str, "file:P": base64}}``;
    None or ``{}``: none).

    Raises:
        ControlError: 400 for a body that is not an object, a parameter of the wrong type or unknown, a file
            that is not base64.
    """
    if body is None:
        return Override()
    params = body.get("parameters", {}) if isinstance(body, dict) else None
    if not isinstance(params, dict):
        raise _fail(name, 'the load request body must be {"parameters": {...}}')
    out = Override()
    for key, value in params.items():
        if key == "config":
            if not isinstance(value, str):
                raise _fail(name, "parameter 'config' must be a string holding the model configuration as JSON")
            out.config = value
        elif key.startswith(FILE_PREFIX):
            try:
                out.files[key[len(FILE_PREFIX):]] = base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                raise _fail(name, f"parameter '{key}' must hold the file's bytes in base64") from None
        else:
            raise _fail(name, f"unknown load parameter '{key}': use 'config' or 'file:<version>/<file>'")
    return out


def from_grpc(name: str, params: Any) -> Override:
    """The overrides of a ``RepositoryModelLoadRequest``'s ``parameters`` map (``config``: ``string_param``;
    ``file:P``: ``bytes_param``).

    Raises:
        ControlError: 400 for a parameter of the wrong kind or unknown.
    """
    out = Override()
    for key in params:
        p = params[key]
        which = p.WhichOneof("parameter_choice")
        if key == "config" and which == "string_param":
            out.config = p.string_param
        elif key.startswith(FILE_PREFIX) and which == "bytes_param":
            out.files[key[len(FILE_PREFIX):]] = p.bytes_param
        elif key == "config" or key.startswith(FILE_PREFIX):
            raise _fail(name, f"parameter '{key}' must be a {'string' if key == 'config' else 'bytes'} parameter")
        else:
            raise _fail(name, f"unknown load parameter '{key}': use 'config' or 'file:<version>/<file>'")
    return out


def config_text(name: str, config_json: str) -> str:
    """Triton's ``ModelConfig`` in text format (what ``config.pbtxt`` holds) from its JSON form.

    Raises:
        ControlError: 400 when ``config_json`` is not JSON or not a ``ModelConfig`` (unknown field, wrong type).
    """
    from google.protobuf import json_format, text_format

    from .triton_config import message_class

    msg = message_class()()
    try:
        json_format.Parse(config_json, msg)
    except json_format.ParseError as e:
        raise _fail(name, f"failed to poll from model repository: invalid config override: {e}") from None
    return text_format.MessageToString(msg)


class Staged:
    """A staging repository holding the model folder that an override's files make (their config written as
    ``config.pbtxt``); ``root`` is the repository to read the model from. :meth:`cleanup` removes it (idempotent).

    Raises:
        ControlError: see the module docstring.
    """

    def __init__(self, name: str, override: Override) -> None:
        if override.config is None:
            raise _fail(name, "file overrides need a 'config' override too (Triton's rule): give both")
        text = config_text(name, override.config)
        paths = {rel: _relative(name, rel) for rel in override.files}
        self.root = Path(tempfile.mkdtemp(prefix="inferperf-load-"))
        folder = self.root / name
        try:
            folder.mkdir()
            for rel, data in override.files.items():
                target = folder / paths[rel]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            (folder / "config.pbtxt").write_text(text)
        except OSError as e:
            self.cleanup()
            raise _fail(name, f"failed to poll from model repository: {e.strerror or e}", 500) from None

    def cleanup(self) -> None:
        """Remove the staging folder (the runtime holds the model in memory once it is loaded)."""
        shutil.rmtree(self.root, ignore_errors=True)


def _relative(name: str, rel: str) -> PurePosixPath:
    """``rel`` as a path inside the model folder.

    Raises:
        ControlError: 400 for an empty, absolute or ``..`` path.
    """
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts or "\\" in rel:
        raise _fail(name, f"file override '{FILE_PREFIX}{rel}' must name a file inside the model folder, e.g. "
                          f"'{FILE_PREFIX}1/model.onnx'")
    return p


__all__ = ["FILE_PREFIX", "Override", "Staged", "config_text", "from_grpc", "from_http"]
