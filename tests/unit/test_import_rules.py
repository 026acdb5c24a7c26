"""DESIGN's import rules, enforced: each layer imports only the layers its row of the table names.

The check reads every module's ``import`` statements with :mod:`ast` (top-level
and inside functions alike, so a lazy import counts) and maps each target inside
``inferperf`` to its layer. Packages the table names that do not exist yet
(``loadgen``, ``pipeline``, ``tune``) are covered the moment they are added,
and a new top-level module or package must be given a row here before it passes.

Reading of the table (``shared/DESIGN.md``, "Import rules"):

* the base is ``results``, ``stats``, ``system``, ``config``, ``errors``, ``clock``,
  plus ``significance`` (the tests beside ``stats``), ``fsutil`` (the one atomic-write
  helper), ``policy`` (DESIGN's "policy module": the pure rules a component and its
  simulator share), ``_version`` (the version string) and ``interrupt`` (the one stop request that
  Ctrl-C and SIGTERM make, read by every long command: issue 23 item 7);
* ``errors``, ``fsutil`` and ``_version`` may be imported by every layer: the one exception
  tree, the one way to write a file and the version are what every layer needs
  (``report``'s row names ``results`` and ``stats`` only, yet it raises ``UsageError``
  and writes files);
* the package root (``inferperf/__init__.py``, the curated public API, which imports
  ``measure``) counts as everything: only ``cli`` and the root itself may import it,
  so ``from inferperf import __version__`` elsewhere is a violation (use ``inferperf._version``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "inferperf"

BASE = frozenset({"results", "stats", "significance", "system", "config", "errors", "clock", "fsutil", "policy",
                  "_version", "interrupt"})
EVERYONE = frozenset({"errors", "fsutil", "_version"})
ROOT = "inferperf"  # the package root: the public API, which pulls in everything
TOP = frozenset({"__init__", "__main__", "cli"})  # may import anything
SERVICES = frozenset({"sweep", "optimize", "serve", "loadgen", "pipeline", "history"})

#: layer -> the layers it may import (besides itself), row by row of DESIGN's table
ALLOWED: dict[str, frozenset[str]] = {
    "report": frozenset({"analysis", "results", "stats"}),
    "tune": SERVICES | {"measure", "analysis"} | BASE,
    "plan": SERVICES | {"measure", "analysis"} | BASE,  # tune's level: composes serve + load, not tune
    **{s: frozenset({"measure", "analysis", "backends", "workload", "zoo"}) | BASE for s in SERVICES},
    "analysis": frozenset({"results", "stats"}) | BASE,
    "measure": frozenset({"backends", "workload", "zoo"}) | BASE,
    "backends": BASE,
    "workload": BASE,
    "zoo": BASE,
    **{b: BASE for b in BASE},
}


@dataclass(frozen=True)
class Violation:
    """One import that breaks the table: ``module`` (layer ``layer``) imports ``target`` (layer ``target_layer``)."""

    module: str
    line: int
    layer: str
    target: str
    target_layer: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.layer} may not import {self.target_layer} ({self.target})"


def _module_name(path: Path, src: Path) -> tuple[str, str]:
    """``(dotted module name, its package)`` for a file under ``src`` (the ``inferperf`` folder)."""
    rel = path.relative_to(src.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _targets(tree: ast.AST, package: str, src: Path) -> list[tuple[int, str]]:
    """Every ``inferperf`` module an import statement names, as ``(line, dotted name)``."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == ROOT]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != ROOT:
                continue
            if target == ROOT:  # `from inferperf import x`: a submodule, or an attribute of the root
                for a in node.names:
                    sub = src / a.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").is_file() or a.name in ALLOWED
                    out.append((node.lineno, f"{ROOT}.{a.name}" if is_module else ROOT))
            else:
                out.append((node.lineno, target))
    return out


def layer_of(dotted: str) -> str:
    """The layer of ``inferperf.X...``: ``X`` (``inferperf`` alone: the root)."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def check(src: Path = SRC) -> list[Violation]:
    """Every import under ``src`` that the table forbids.

    Raises:
        AssertionError: a top-level module or package that has no row in the table.
    """
    found: list[Violation] = []
    for path in sorted(src.rglob("*.py")):
        module, package = _module_name(path, src)
        layer = path.relative_to(src).parts[0].removesuffix(".py")
        if layer in TOP:
            continue
        assert layer in ALLOWED, f"{module}: layer {layer!r} has no row in the import-rule table: add it"
        allowed = ALLOWED[layer] | EVERYONE | {layer}
        for line, target in _targets(ast.parse(path.read_text(), str(path)), package, src):
            t_layer = layer_of(target)
            if t_layer not in allowed:
                found.append(Violation(module, line, layer, target, t_layer))
    return found


def test_design_import_rules_hold() -> None:
    violations = check()
    assert not violations, "import rules broken:\n" + "\n".join(map(str, violations))


def test_every_package_named_by_design_has_a_row() -> None:
    for name in ("cli", "report", "tune", "plan", "sweep", "optimize", "serve", "loadgen", "pipeline", "analysis",
                 "measure", "backends", "workload", "zoo", "results", "stats", "system", "config", "errors", "clock",
                 "policy"):
        assert name in ALLOWED or name in TOP, name
    # the services may not import each other; tune and plan sit above them, side by side
    for s in SERVICES:
        assert not (ALLOWED[s] & (SERVICES - {s})) and "tune" not in ALLOWED[s] and "plan" not in ALLOWED[s]
    assert "plan" not in ALLOWED["tune"] and "tune" not in ALLOWED["plan"]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "inferperf"
    for rel, text in {"__init__.py": "", "errors.py": "", "results/__init__.py": "", **files}.items():
        f = src / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return src


@pytest.mark.parametrize(("rel", "text", "layer", "target_layer"), [
    ("backends/null.py", "def load():\n    from ..workload.signature import check_model_file\n", "backends", "workload"),
    ("report/build.py", "def build():\n    from .. import __version__\n", "report", ROOT),
    ("measure/bench.py", "from inferperf import __version__\n", "measure", ROOT),
    ("serve/app.py", "import inferperf.loadgen.driver\n", "serve", "loadgen"),
    ("loadgen/driver.py", "from inferperf.serve import app\n", "loadgen", "serve"),
    ("analysis/fit.py", "from ..measure import runner\n", "analysis", "measure"),
    ("analysis/compare/data.py", "from ...measure import runner\n", "analysis", "measure"),
    ("analysis/profile/ops.py", "def f():\n    from ...backends import ort\n", "analysis", "backends"),
    ("results/io.py", "from inferperf import zoo\n", "results", "zoo"),
    ("tune/search.py", "from ..backends import base\n", "tune", "backends"),
    ("plan/fleet.py", "from ..tune import search\n", "plan", "tune"),
    ("analysis/serving_sim.py", "from ..serve.batcher import decide\n", "analysis", "serve"),
    ("policy/pipeline.py", "from ..pipeline.trace import Trace\n", "policy", "pipeline"),
])
def test_a_deliberate_violation_is_caught(tmp_path: Path, rel: str, text: str, layer: str, target_layer: str) -> None:
    (v,) = check(_tree(tmp_path, {rel: text}))
    assert (v.layer, v.target_layer) == (layer, target_layer)
    assert str(v).startswith(f"inferperf.{rel.removesuffix('.py').replace('/', '.')}:")


def test_allowed_imports_pass(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "cli/bench.py": "from .. import __version__\nfrom ..measure import bench\nimport inferperf.tune\n",
        "tune/search.py": "from ..sweep import run\nfrom ..serve import app\nfrom inferperf import stats\n",
        "measure/bench.py": "from .._version import __version__\nfrom ..backends.base import create_backend\n",
        "report/build.py": "from ..analysis import findings\nfrom ..errors import UsageError\nfrom .charts import x\n",
        "zoo.py": "from inferperf.errors import UsageError\nfrom inferperf.fsutil import atomic_write_bytes\n",
        "analysis/compare/core.py": "from ...significance import adjust\nfrom ..points import point\nfrom .data import Case\n",
        "serve/batcher.py": "from ..policy.batching import decide\n",
        "pipeline/chain.py": "from ..policy import pipeline as rules\n",
        "policy/pipeline.py": "from ..clock import FakeClock\n",
    })
    assert check(src) == []


def import_cycles(src: Path = SRC) -> list[frozenset[str]]:
    """Sets of ``inferperf`` modules that import each other in a ring (top-level and lazy imports alike):
    the strongly connected components, with more than one module, of the module import graph."""
    imports: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.py")):
        module, package = _module_name(path, src)
        imports[module] = {t for _, t in _targets(ast.parse(path.read_text(), str(path)), package, src)}

    def module_of(target: str) -> str:  # `from pkg.mod import name`: the module, not the name in it
        while target and target not in imports:
            target = target.rpartition(".")[0]
        return target

    graph = {m: {module_of(t) for t in ts} - {"", m} for m, ts in imports.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            ring = {stack.pop()}
            while v not in ring:
                ring.add(stack.pop())
            if len(ring) > 1:
                out.append(frozenset(ring))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return out


#: import rings found when this check was added (issue 25), each to be broken; no new one may appear
KNOWN_CYCLES = {frozenset({f"inferperf.{m}" for m in ring}) for ring in (
    ("cli.bench", "cli.compare"),
    ("serve.classification", "serve.protocol"),
    ("serve.repository", "serve.triton_model"),
    ("report", "report.build", "report.render"),
    ("sweep.output", "sweep.run"),
)}


def test_no_new_import_cycle_and_serving_has_none() -> None:
    cycles = import_cycles()
    assert not [c for c in cycles if c & {"inferperf.serve.app", "inferperf.serve.control", "inferperf.serve.server"}]
    assert set(cycles) <= KNOWN_CYCLES, "new import cycles:\n" + "\n".join(
        " <-> ".join(sorted(c)) for c in set(cycles) - KNOWN_CYCLES)


def test_an_import_cycle_is_found(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"serve/app.py": "def f():\n    from .control import X\n",
                           "serve/control.py": "from .server import close\n",
                           "serve/server.py": "from .app import ServeApp\n", "serve/build.py": "from . import app\n"})
    assert import_cycles(src) == [frozenset({"inferperf.serve.app", "inferperf.serve.control", "inferperf.serve.server"})]


def test_a_new_top_level_package_needs_a_row(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="'profile' has no row"):
        check(_tree(tmp_path, {"profile/__init__.py": ""}))


def two_file_circles(src: Path = SRC) -> list[tuple[str, str]]:
    """Pairs of modules that import each other, counting function-level imports (which hide a circle from Python
    but not from a reader): ``(a, b)`` with ``a < b``. A package's ``__init__`` importing its own modules (a curated
    public API) is left out."""
    edges: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.py")):
        module, package = _module_name(path, src)
        if path.name == "__init__.py":
            continue
        edges[module] = {t for _, t in _targets(ast.parse(path.read_text(), str(path)), package, src)}
    return sorted({tuple(sorted((a, b))) for a, targets in edges.items() for b in targets  # type: ignore[misc]
                   if b != a and a in edges.get(b, set())})


def test_no_two_modules_import_each_other() -> None:
    """Issue 38 item 4: serve/protocol <-> classification, serve/repository <-> triton_model, sweep/run <-> output and
    cli/bench <-> compare imported each other (behind function-level imports)."""
    assert two_file_circles() == []


def test_a_circle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"serve/__init__.py": "", "serve/a.py": "from .b import x\n",
                           "serve/b.py": "def f():\n    from .a import y\n"})
    assert two_file_circles(src) == [("inferperf.serve.a", "inferperf.serve.b")]


def test_time_is_read_through_the_clock() -> None:
    """Issue 38 item 5: serve/model.py, cli/render.py and tune/'s deadlines, lock and heartbeats read time.time,
    time.monotonic or perf_counter directly; they go through inferperf.clock now (SYSTEM_CLOCK, monotonic_s, and
    wall_s where an instant other processes compare is meant)."""
    import re

    direct = re.compile(r"\btime\.(time|monotonic|perf_counter|perf_counter_ns|monotonic_ns|time_ns)\(")
    files = [SRC / "serve" / "model.py", SRC / "cli" / "render.py", *sorted((SRC / "tune").glob("*.py"))]
    hits = [f"{f.relative_to(SRC)}:{i}" for f in files for i, line in enumerate(f.read_text().splitlines(), 1)
            if direct.search(line)]
    assert hits == []
