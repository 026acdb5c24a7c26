"""Render a :class:`~.build.Report` to one self-contained HTML file or to Markdown (jinja2 templates).

The HTML embeds plotly.js once (from the installed ``plotly`` package, never a
CDN), the chart specs as JSON, the CSS, and a small script that draws the charts,
sorts the table and records chart and error counts in ``#report-status`` (read by
the browser test). jinja2 and plotly are imported here, inside the functions, so
``import inferperf`` stays light.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..fsutil import atomic_write_text, json_safe
from .build import Report
from .numbers import fmt_num

GROUP_TITLES = {
    "distribution": "Latency distribution", "timeline": "Latency over time", "threads": "Thread scaling",
    "batch": "Batch size", "size": "Input size", "concurrency": "Concurrency", "resources": "CPU and memory",
    "precision": "Precision comparison", "runtimes": "Runtime comparison",
    "profile": "Operator profile", "load": "Load (HTTP)", "serve": "Serving (server side)",
    "tune": "Tuning", "pipeline": "Pipeline stages", "plan": "Capacity plan (predicted)",
    "history": "Performance history",
}  # fmt: skip

SECTION_TITLES = {
    "summary": "Summary", "environment": "Test environment", "method": "Method", "raw-data": "Raw data",
    "charts": "Charts", "bottlenecks": "Bottleneck analysis", "recommendations": "Recommendations and deployment plan",
}  # fmt: skip


def _env(kind: str) -> Any:
    try:
        import jinja2
    except ImportError as e:  # pragma: no cover - jinja2 is a core dependency
        raise UsageError("reports need jinja2: pip install 'jinja2>=3.1'") from e
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("inferperf.report", "templates"),
        autoescape=kind == "html",
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["num"] = fmt_num
    env.filters["md"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env


def _template_text(name: str) -> str:
    from importlib.resources import files

    return (files("inferperf.report") / "templates" / name).read_text(encoding="utf-8")


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element (NaN and infinities become null)."""
    return json.dumps(json_safe(obj), separators=(",", ":"), allow_nan=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def _context(rep: Report) -> dict[str, Any]:
    groups: list[tuple[str, str, list[Any]]] = []
    for g, title in GROUP_TITLES.items():
        cs = rep.charts_in(g)
        if cs:
            groups.append((g, title, cs))
    return {"r": rep, "groups": groups, "section_titles": SECTION_TITLES}


def render_html(rep: Report) -> str:
    """The report as one HTML document (plotly.js embedded; opens offline)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as e:
        raise UsageError("HTML reports need plotly: pip install 'plotly>=5.20' (or use --format markdown)") from e
    ctx = _context(rep)
    specs = {c.id: c.figure for c in rep.charts}
    ctx.update(
        plotly_js=get_plotlyjs(),
        css=_template_text("report.css"),
        js=_template_text("report.js"),
        charts_json=_script_json(specs),
        csv_href="data:text/csv;charset=utf-8," + urllib.parse.quote(rep.csv),
    )
    from markupsafe import Markup

    for k in ("plotly_js", "css", "js", "charts_json"):
        ctx[k] = Markup(ctx[k])
    return _env("html").get_template("report.html.j2").render(**ctx)


def render_markdown(rep: Report) -> str:
    """The report as Markdown (GitHub-flavoured tables): the same sections, charts summarised as tables."""
    return _env("md").get_template("report.md.j2").render(**_context(rep))


def write(rep: Report, output: str | Path, fmt: str = "html") -> Path:
    """Render ``rep`` as ``html`` or ``markdown`` into ``output``.

    Raises:
        UsageError: unknown format or an unwritable path.
    """
    if fmt not in ("html", "markdown"):
        raise UsageError(f"--format {fmt!r}: choose html or markdown")
    text = render_html(rep) if fmt == "html" else render_markdown(rep)
    p = Path(output)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, text)
    except OSError as e:
        raise UsageError(f"cannot write report to '{p}': {e.strerror or e}: choose another --output") from e
    return p
