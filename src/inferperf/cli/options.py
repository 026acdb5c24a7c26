"""The session and workload flags every command shares, declared once; and CLI flag values turned into a
:class:`~inferperf.config.BenchConfig`, layered defaults < file < flags.

The aliases below are ``typing.Annotated`` types (typer reads the option from them): a command declares
``intra_op_num_threads: IntraOpThreads = None`` and gets the one flag with the one help text. One value each
for the commands that measure one configuration (bench, serve, optimize, profile, tune's fixed shapes); the
``...Axis`` aliases take comma lists for the commands that search over them (sweep, tune).
"""

from __future__ import annotations

import inspect
import json
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer
from pydantic import ValidationError

from ..config import BenchConfig
from ..errors import UsageError, first_error
from ..workload.shapes import parse_dims, parse_int_range, parse_shape, parse_value

_Opt = typer.Option

# one configuration: bench, serve, optimize, profile (and tune's fixed --shape / --dim)
Backend = Annotated[Optional[str], _Opt(help="onnxruntime | openvino | torch (or ort, ov, pytorch)")]
IntraOpThreads = Annotated[Optional[int], _Opt(help="intra-op threads; default: the effective CPUs (shared among"
                                                    " streams or instances); 0: ORT's own default")]
InterOpThreads = Annotated[Optional[int], _Opt(help="ORT inter-op threads (parallel execution mode only)")]
ExecutionMode = Annotated[Optional[str], _Opt(help="ORT execution mode: sequential | parallel")]
GraphOptimizationLevel = Annotated[Optional[str], _Opt(help="ORT graph optimizations: disable | basic | extended | all")]
Providers = Annotated[Optional[str], _Opt(help="ORT execution providers, comma list, e.g. CPUExecutionProvider")]
SessionConfig = Annotated[Optional[list[str]], _Opt(help="KEY=VALUE (repeatable): ORT session.* entries; OpenVINO"
                                                         " properties (PERFORMANCE_HINT=THROUGHPUT, NUM_STREAMS=2,"
                                                         " DEVICE=CPU); torch.device=cuda, torch.compile=default")]
Shape = Annotated[Optional[list[str]], _Opt(help="NAME:1x3x640x640 (or 1x3x640x640 for a one-input model); repeatable")]
Dim = Annotated[Optional[list[str]], _Opt(help="symbolic dims by name, everywhere they appear: batch=4,seq=128;"
                                               " repeatable")]
BatchSize = Annotated[Optional[int], _Opt(help="leading symbolic dim (rows per query); default 1")]
InputData = Annotated[Optional[Path], _Opt(help="inputs: .npz keyed by input name, or .npy for a one-input model")]


#: the ORT session flags of the commands that run one configuration in-process and serve it (bench, serve),
#: declared once: :func:`with_session_flags` adds them to a command
SESSION_FLAGS: dict[str, tuple[Any, Any]] = {
    "intra_op_num_threads": (IntraOpThreads, None), "inter_op_num_threads": (InterOpThreads, None),
    "execution_mode": (ExecutionMode, None), "graph_optimization_level": (GraphOptimizationLevel, None),
    "providers": (Providers, None),
    "disable_mem_pattern": (Annotated[bool, _Opt("--disable-mem-pattern", help="enable_mem_pattern=False")], False),
    "disable_cpu_mem_arena": (Annotated[bool, _Opt("--disable-cpu-mem-arena", help="enable_cpu_mem_arena=False")], False),
    "session_config": (SessionConfig, None),
}


def with_session_flags(command: Callable[..., int]) -> Callable[..., int]:
    """Give ``command`` the flags of :data:`SESSION_FLAGS` in place of its ``**session`` parameter.

    typer builds a command's options from ``inspect.signature(command, eval_str=True)`` and
    ``typing.get_type_hints(command)`` (typer/utils.py ``get_params_from_function``), so this sets
    ``__signature__`` (the command's own parameters, evaluated, then the session flags, keyword-only, with
    their defaults) and ``__annotations__``. The command receives the flags in ``session`` (name -> value; None
    or False when not given), for :func:`config_flags`. Apply it under ``@app.command``.

    Raises:
        TypeError: ``command`` has no ``**session`` parameter, or already declares one of the flags.
    """
    sig = inspect.signature(command, eval_str=True)
    own = list(sig.parameters.values())
    if not own or own[-1].kind is not inspect.Parameter.VAR_KEYWORD or own[-1].name != "session":
        raise TypeError(f"{command.__name__} needs a last parameter **session for with_session_flags")
    clash = set(SESSION_FLAGS) & set(sig.parameters)
    if clash:
        raise TypeError(f"{command.__name__} declares {sorted(clash)} itself")
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=alias)
             for name, (alias, default) in SESSION_FLAGS.items()]
    command.__signature__ = sig.replace(parameters=own[:-1] + added)  # type: ignore[attr-defined]
    command.__annotations__ = {**{p.name: p.annotation for p in own[:-1]}, **{p.name: p.annotation for p in added},
                               "return": sig.return_annotation}
    return command

# the stop rule of each measured run (WarmupConfig / StopConfig) where the command measures single runs: bench, optimize
Warmup = Annotated[Optional[int], _Opt(help="warm-up runs before each measured run (default 10)")]
Iterations = Annotated[Optional[int], _Opt(help="minimum measured queries per run (default 100)")]
DurationS = Annotated[Optional[float], _Opt(help="minimum measured seconds per run (default 5)")]
MaxDurationS = Annotated[Optional[float], _Opt(help="cap on measured seconds per run (default 60)")]

# what a command prints and when it fails
JsonOut = Annotated[bool, _Opt("--json", help="print the Result JSON to stdout (no table)")]
FailOnInvalid = Annotated[bool, _Opt("--fail-on-invalid", help="exit 3 when the result is INVALID")]
#: read by :func:`inferperf.cli.main` before typer parses (so it is accepted anywhere); declared for --help
Debug = Annotated[bool, _Opt("--debug", help="show tracebacks (accepted anywhere on the line)")]

# axes (comma lists): sweep, tune
_CommaList = Optional[str]
BackendAxis = Annotated[_CommaList, _Opt(help="axis: comma list of backends")]
IntraOpThreadsAxis = Annotated[_CommaList, _Opt(help="axis: comma list of intra-op threads (default: the machine's"
                                                     " thread ladder)")]
InterOpThreadsAxis = Annotated[_CommaList, _Opt(help="axis: comma list of inter-op threads (parallel mode only)")]
ExecutionModeAxis = Annotated[_CommaList, _Opt(help="axis: sequential,parallel")]
GraphOptimizationLevelAxis = Annotated[_CommaList, _Opt(help="axis: disable,basic,extended,all")]
BatchSizeAxis = Annotated[_CommaList, _Opt(help="axis: comma list of rows per query, e.g. 1,2,4 (the objective becomes"
                                                " samples/s)")]
ConcurrencyAxis = Annotated[_CommaList, _Opt(help="axis: comma list of closed-loop streams (HTTP clients of a served"
                                                  " model)")]
SessionModeAxis = Annotated[_CommaList, _Opt(help="axis: shared,per-stream")]

#: a command's parameter (its flag, ``_`` for ``-``) -> the BenchConfig setting it sets: declared once for every
#: command that builds a BenchConfig (bench, serve, optimize, profile, plan, tune's fixed settings); a command
#: passes its parameters to :func:`config_flags` instead of mapping them again.
SETTING_OF: dict[str, str] = {
    "backend": "backend",
    "intra_op_num_threads": "session.intra_op_num_threads",
    "inter_op_num_threads": "session.inter_op_num_threads",
    "execution_mode": "session.execution_mode",
    "graph_optimization_level": "session.graph_optimization_level",
    "providers": "session.providers",
    "session_config": "session.session_config",
    "shape": "workload.shapes",
    "dim": "workload.dims",
    "batch_size": "workload.batch_size",
    "input_pool_size": "workload.input_pool_size",
    "seed": "workload.seed",
    "int_range": "workload.int_ranges",
    "value": "workload.values",
    "input_data": "workload.input_data",
    "warmup": "warmup.iterations",
    "warmup_s": "warmup.duration_s",
    "iterations": "stop.min_iterations",
    "duration_s": "stop.min_duration_s",
    "max_duration_s": "stop.max_duration_s",
    "percentile_method": "percentile_method",
    "scenario": "scenario",
    "concurrency": "concurrency",
    "session_mode": "session_mode",
    "numa_node": "placement.numa_node",
    "repeat": "repeat",
    "allocator": "allocator",
}

#: on/off switches that set a setting only when on: parameter -> (setting, its value when on).
SWITCH_OF: dict[str, tuple[str, Any]] = {
    "disable_mem_pattern": ("session.enable_mem_pattern", False),
    "disable_cpu_mem_arena": ("session.enable_cpu_mem_arena", False),
    "force": ("workload.force", True),
    "no_sampler": ("sampler", False),
}

#: config field path -> the flag that sets it, for error messages.
FLAG_OF = {dotted: "--" + name.replace("_", "-") for name, dotted in SETTING_OF.items()} | {
    "null_latency_ms": "--null-latency-ms", "placement.cpus": "--cpus"}


def config_flags(params: dict[str, Any], **override: Any) -> dict[str, Any]:
    """The BenchConfig settings a command's parameters set, for :func:`build_config`: ``params`` is the command's
    ``locals()`` (or any name -> value mapping); names outside :data:`SETTING_OF` / :data:`SWITCH_OF` are skipped,
    None means not given. ``override``: settings by dotted path that the command computes itself (``None`` drops
    one: a comparison sets its backend per case).

    >>> config_flags({"warmup": 3, "force": True, "no_sampler": False, "output": "x"})
    {'warmup.iterations': 3, 'workload.force': True}
    """
    flags: dict[str, Any] = {}
    for name, value in params.items():
        if name in SETTING_OF and value is not None:
            flags[SETTING_OF[name]] = str(value) if isinstance(value, Path) else value
        elif name in SWITCH_OF and value:
            setting, on = SWITCH_OF[name]
            flags[setting] = on
    flags.update(override)
    return flags


def parse_session_config(entries: list[str]) -> dict[str, str]:
    """Parse ``--session-config KEY=VALUE`` entries.

    Raises:
        UsageError: an entry without ``=`` or with an empty key or value.
    """
    out = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(
                f"malformed --session-config {entry!r}: use KEY=VALUE, e.g. session.intra_op.allow_spinning=0"
            )
        out[key.strip()] = value.strip()
    return out


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for p in parents:
        doc = doc.setdefault(p, {})
    doc[leaf] = value


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a BenchConfig layer from a ``.json``, ``.toml`` or ``.yaml``/``.yml`` file.

    The same file may hold a ``serve:`` section (ServeOptions, read by ``inferperf serve``).

    Raises:
        UsageError: missing file, unknown suffix, unparsable content.
    """
    if not path.is_file():
        raise UsageError(f"--config file '{path}' not found (or not a file): check the path")
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            doc = json.loads(path.read_text())
        elif suffix == ".toml":
            doc = tomllib.loads(path.read_text())
        elif suffix in (".yaml", ".yml"):
            import yaml

            doc = yaml.safe_load(path.read_text())
        else:
            raise UsageError(f"--config '{path}' must be .json, .toml or .yaml")
    except (ValueError, UnicodeDecodeError, tomllib.TOMLDecodeError, _yaml_error()) as e:
        raise UsageError(f"--config '{path}' does not parse: {' '.join(str(e).split())}") from e
    if not isinstance(doc, dict):
        raise UsageError(f"--config '{path}' must hold an object of settings (BenchConfig fields), not a {type(doc).__name__}")
    return doc


def _yaml_error() -> type[Exception]:
    import yaml

    return yaml.YAMLError


def build_config(
    flags: dict[str, Any], config_file: Path | None = None, serve_section: dict[str, Any] | None = None
) -> BenchConfig:
    """Merge a config file (if any) and the flags given (None = not given) into a BenchConfig.

    ``flags`` maps dotted config paths (``stop.min_iterations``) to values;
    list-valued flags (``workload.shapes`` as raw ``--shape`` strings) are parsed here.
    The file's ``serve:`` section goes into ``serve_section`` when given (``inferperf serve``);
    otherwise it is ignored with a note on stderr.

    Raises:
        UsageError: malformed flag values or settings out of range (names the flag).
    """
    doc: dict[str, Any] = read_config_file(config_file) if config_file else {}
    if "serve" in doc:
        section = doc.pop("serve") or {}
        if not isinstance(section, dict):
            raise UsageError(f"--config '{config_file}': the serve: section must be a mapping of ServeOptions fields")
        if serve_section is not None:
            serve_section.update(section)
        else:
            print(f"note: --config {config_file}: the serve: section is for `inferperf serve`; ignored here", file=sys.stderr)
    raw_shapes = flags.pop("workload.shapes", None)
    if raw_shapes:
        shapes: dict[str, list[int]] = {}
        for text in raw_shapes:
            name, dims = parse_shape(text)
            shapes[name] = dims
        _set(doc, "workload.shapes", shapes)
    raw_dims = flags.pop("workload.dims", None)
    if raw_dims:
        dims: dict[str, int] = {}
        for text in raw_dims:
            dims.update(parse_dims(text))
        _set(doc, "workload.dims", dims)
    raw_ranges = flags.pop("workload.int_ranges", None)
    if raw_ranges:
        _set(doc, "workload.int_ranges", dict(parse_int_range(t) for t in raw_ranges))
    raw_values = flags.pop("workload.values", None)
    if raw_values:
        _set(doc, "workload.values", dict(parse_value(t) for t in raw_values))
    raw_sc = flags.pop("session.session_config", None)
    if raw_sc:
        _set(doc, "session.session_config", parse_session_config(raw_sc))
    providers = flags.pop("session.providers", None)
    if providers:
        _set(doc, "session.providers", [p.strip() for p in providers.split(",") if p.strip()])
    for dotted, value in flags.items():
        if value is not None:
            _set(doc, dotted, value)
    try:
        return BenchConfig.model_validate(doc)
    except ValidationError as e:
        kind, where, msg, _ = first_error(e)
        if kind == "extra_forbidden":
            source = f"--config {config_file}: " if config_file else ""
            raise UsageError(f"{source}unknown setting '{where}': check its spelling against BenchConfig's fields") from None
        if not where:
            raise UsageError(msg) from None
        flag = FLAG_OF.get(where, (f"--config {config_file}: " if config_file else "") + where)
        raise UsageError(f"{flag}: {msg}") from None
