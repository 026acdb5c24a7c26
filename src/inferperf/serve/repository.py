"""A model repository on disk: one folder per model, in inferperf's layout or Triton's.

inferperf's layout: ``DIR/NAME/model.yaml`` (the settings-file format of ``inferperf serve --config``:
BenchConfig fields plus a ``serve:`` section, both optional) beside one ONNX file (``model.onnx``, or the
only ``*.onnx`` in the folder); served as version 1.

Triton's layout: ``DIR/NAME/config.pbtxt`` plus version folders ``DIR/NAME/<integer>/model.onnx`` (or
the config's ``default_model_filename``); the config is read by :mod:`inferperf.serve.triton_config`,
its version policy picks the versions (default: the highest one), the fields inferperf does not
map (none of them changes the wire contract) are listed in one warning line per model, and the model is
served with the config's tensors (:mod:`inferperf.serve.triton_model`: dims, reshape, labels).

A model that cannot be served (a config asking for what inferperf does not do, a file that does not
load) does not stop the others: :func:`scan` with a ``failures`` dict records its reason there, and the
model is UNAVAILABLE in the repository index (Triton's behaviour without ``--exit-on-error``).

Confinement: a model folder, version folder or model file whose real path (symlinks resolved) leaves
DIR is refused and never opened; so are names that are not plain folder names (``..``, separators).

Sources: Triton's model repository docs (docs/user_guide/model_repository.md: layout, version folders,
``default_model_filename``) and model_configuration.md (version policies).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..config import BenchConfig
from ..errors import UsageError, first_error
from .paths import confined
from .options import ServeOptions
from .triton_config import TensorConfig, TritonConfigError
from .triton_config import parse as parse_triton_config

#: A model or version name: what a URL path segment and a folder name can both be.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


@dataclass
class RepositoryModel:
    """One model of the repository: ``name``, ``layout`` ("inferperf" or "triton"), ``versions`` (version
    -> ONNX file, the versions the policy serves), ``config`` and ``serve`` (the settings it is served
    with), ``warnings`` (one line each: fields ignored), ``declared``: the inputs and outputs a Triton
    config lists (held against the model before it loads), ``folder``: the model folder, ``sequence``: its
    ``sequence_batching`` (:class:`~inferperf.serve.sequences.SequenceSettings`), None without."""

    name: str
    layout: str
    versions: dict[str, Path]
    config: BenchConfig
    serve: ServeOptions
    warnings: list[str] = field(default_factory=list)
    declared: tuple[list[TensorConfig], list[TensorConfig]] = ([], [])
    folder: Path | None = None
    sequence: Any = None


def check_name(name: str, what: str = "model name") -> str:
    """``name`` when it is a plain folder name (letters, digits, ``_.-``; no ``..``, no separators).

    Raises:
        UsageError: anything else (names the rule).
    """
    if not NAME.fullmatch(name) or ".." in name:
        raise UsageError(f"{what} {name!r} is not a plain name (letters, digits, '_', '.', '-'; no '..' or '/')")
    return name


def scan(root: Path, failures: dict[str, str] | None = None) -> list[RepositoryModel]:
    """Every model folder of ``root`` (sorted by name; hidden folders and loose files are skipped).

    Args:
        failures: when given, a model that cannot be read is left out and its reason recorded here
            (name -> message); otherwise the first one raises.

    Raises:
        UsageError: ``root`` is not a folder or holds no model folder; without ``failures``, a model that
            is malformed, asks for what inferperf does not do, or leaves the repository (the message names
            the folder and the fix).
    """
    if not root.is_dir():
        raise UsageError(f"--model-repository '{root}' is not a folder: give the repository's path")
    names = [d.name for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    if not names:
        raise UsageError(f"--model-repository '{root}' holds no model folder (NAME/model.yaml or NAME/config.pbtxt)")
    models = []
    for name in names:
        try:
            models.append(read_model(root, name))
        except UsageError as e:
            if failures is None:
                raise
            failures[name] = str(e)
    return models


def read_model(root: Path, name: str, config_text: str | None = None) -> RepositoryModel:
    """Read model ``name`` of the repository at ``root`` (either layout).

    Args:
        config_text: a Triton configuration (text format) read instead of the folder's ``config.pbtxt`` (a
            load-time override, :mod:`inferperf.serve.load_override`); Triton-layout folders only.

    Raises:
        UsageError: unknown name, a folder with neither ``model.yaml`` nor ``config.pbtxt``, bad settings,
            missing versions or files, a path leaving the repository, or ``config_text`` for an inferperf-layout
            folder.
    """
    check_name(name)
    folder = confined(root, root / name, f"model '{name}'")
    if not folder.is_dir():
        raise UsageError(f"model '{name}' is not in the repository '{root}'")
    if config_text is not None and not (folder / "config.pbtxt").is_file():
        raise UsageError(f"a config override applies to Triton-layout models (config.pbtxt); '{folder}' holds "
                         "model.yaml: edit it and load without the override")
    if (folder / "config.pbtxt").is_file():
        return _triton_model(root, name, folder, config_text)
    if (folder / "model.yaml").is_file():
        return _inferperf_model(root, name, folder)
    raise UsageError(f"model folder '{folder}' has neither model.yaml (inferperf layout) nor config.pbtxt (Triton's)")


def _settings(doc: Any, where: Path) -> tuple[BenchConfig, ServeOptions]:
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise UsageError(f"{where}: must hold a mapping of settings (BenchConfig fields plus serve:)")
    doc = dict(doc)
    serve = doc.pop("serve", None) or {}
    try:
        return BenchConfig.model_validate(doc), ServeOptions.model_validate(serve)
    except ValidationError as e:
        _, loc, msg, _ = first_error(e)
        raise UsageError(f"{where}: {loc}: {msg}") from None


def _inferperf_model(root: Path, name: str, folder: Path) -> RepositoryModel:
    import yaml

    where = folder / "model.yaml"
    try:
        doc = yaml.safe_load(where.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise UsageError(f"{where} does not parse: {' '.join(str(e).split())}") from None
    config, serve = _settings(doc, where)
    onnx = [folder / "model.onnx"] if (folder / "model.onnx").is_file() else sorted(folder.glob("*.onnx"))
    if len(onnx) != 1:
        raise UsageError(f"model folder '{folder}' needs one ONNX file (model.onnx), found {len(onnx)}")
    path = confined(root, onnx[0], f"model '{name}' file")
    return RepositoryModel(name, "inferperf", {"1": path}, config, serve)


def _triton_model(root: Path, name: str, folder: Path, config_text: str | None = None) -> RepositoryModel:
    where = folder / "config.pbtxt"
    try:
        tc = parse_triton_config(where.read_text() if config_text is None else config_text,
                                 str(where) if config_text is None else f"config override of '{name}'")
    except (TritonConfigError, UnicodeDecodeError) as e:
        raise UsageError(str(e)) from None
    if tc.name and tc.name != name:
        raise UsageError(f"{where}: name '{tc.name}' differs from its folder '{name}': Triton requires them equal")
    available = sorted(int(d.name) for d in folder.iterdir() if d.is_dir() and d.name.isdigit())
    kind, arg = tc.version_policy
    if kind == "all":
        chosen = available
    elif kind == "specific":
        missing = [v for v in arg if v not in available]
        if missing:
            raise UsageError(f"{where}: version_policy names versions {missing}, not found in {folder}")
        chosen = arg
    else:
        chosen = available[-arg:]
    if not chosen:
        raise UsageError(f"model folder '{folder}' has no version folder (1/, 2/ ... holding {tc.model_filename})")
    versions = {}
    for v in chosen:
        path = folder / str(v) / tc.model_filename
        if not path.is_file():
            raise UsageError(f"version {v} of model '{name}' has no {tc.model_filename} ({path})")
        versions[str(v)] = confined(root, path, f"model '{name}' version {v}")
    try:
        serve = ServeOptions.model_validate(tc.serve)
    except ValidationError as e:
        raise UsageError(f"{where}: {first_error(e)[2]}") from None
    warnings = [f"{where}: inferperf ignores {', '.join(tc.ignored)}"] if tc.ignored else []
    return RepositoryModel(name, "triton", versions, BenchConfig(), serve, warnings, (tc.inputs, tc.outputs), folder,
                           tc.sequence)


def load_served(entry: RepositoryModel, observer: Any = None, clock: Any = None) -> list[Any]:
    """Load and warm up every version of ``entry`` (a ``ServedModel`` each, highest version last).

    A Triton-layout model is held against its config first (:func:`inferperf.serve.triton_model.check_tensors`),
    warmed up with the dims the config fixes, and served through
    :class:`~inferperf.serve.triton_model.TritonServed` (the config's tensors, reshape and labels).

    Raises:
        UsageError / ModelError: as ``ServedModel.load``; UsageError when a Triton config's tensors cannot
            be the model's (names, datatypes, dims) or a label file cannot be read.
    """
    from ..clock import SYSTEM_CLOCK
    from .model import ServedModel
    from .triton_model import TritonServed, check_tensors, read_labels

    served: list[Any] = []
    versions = tuple(entry.versions)
    triton = entry.layout == "triton" and entry.folder is not None
    labels = read_labels(entry.folder, entry.declared[1], entry.folder.parent) if triton else {}
    try:
        for version, path in entry.versions.items():
            config, strings = entry.config, []
            if triton:
                shapes, strings = check_tensors(entry.name, version, path, entry.serve.max_batch_size or 0,
                                                *entry.declared)
                config = config.model_copy(update={"workload": config.workload.model_copy(update={"shapes": shapes})})
            warm = not (strings and config.workload.input_data is None)  # Triton warms up only with model_warmup
            m = ServedModel.load(str(path), config, entry.serve, name=entry.name, observer=observer,
                                 clock=clock or SYSTEM_CLOCK, version=version, versions=versions, warmup=warm)
            if not warm:  # say why in the repository's words (ServedModel's note names --warmup 0, not given here)
                m.notes[:] = [n for n in m.notes if "--warmup 0" not in n]
                m.notes.append(f"string input(s) {strings}: served without warm-up (synthetic strings are not"
                               " generated; Triton warms a model up only with model_warmup)")
            served.append(TritonServed(m, *entry.declared, labels, entry.sequence) if triton else m)
    except BaseException:
        import asyncio

        for m in served:
            asyncio.run(m.close(drain=False))
        raise
    return served
