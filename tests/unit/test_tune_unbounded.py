"""Issue 24 item 7: an unbounded ratio interval (Fieller's set when the baseline's mean is not significantly
above 0) is stored as null with its reason in every tune output, reads "unbounded: no claim", and the report
over such a tune folder builds (it raised TypeError on ``[null, null]``)."""

from __future__ import annotations

import json
from pathlib import Path

from inferperf.report import build
from inferperf.stats import UNBOUNDED_TEXT, bounded, ci_text
from inferperf.tune.objective import Goal
from inferperf.tune.run import tune
from inferperf.tune.simulate import SurfaceEvaluator
from inferperf.tune.validate import _ratio
from tests.unit.test_tune import _info, _spec, _surface


def _strict(text: str) -> object:
    """JSON as a strict reader (JavaScript's JSON.parse) takes it: NaN and Infinity tokens are errors."""
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_an_unbounded_ratio_is_null_with_its_reason() -> None:
    d = _ratio(Goal("throughput"), [10.0, 11.0], [1.0, 100.0])  # baseline mean not significantly above 0
    assert d["ci95"] is None and d["separated"] is False
    assert "unbounded" in d["unbounded"]
    assert ci_text(d["ci95"]) == f"95 % CI {UNBOUNDED_TEXT}"
    bounded_doc = _ratio(Goal("throughput"), [10.0, 11.0, 10.5], [5.0, 5.2, 5.1])
    assert bounded(bounded_doc["ci95"]) and "unbounded" not in bounded_doc
    for old in ([None, None], [float("-inf"), float("inf")], None, []):  # older files, other writers
        assert not bounded(old) and ci_text(old).endswith(UNBOUNDED_TEXT)


def test_tune_outputs_and_the_report_say_unbounded_no_claim(tmp_path: Path) -> None:
    surface = _surface()
    surface.planted["[]"] = 50.0  # the defaults' first validation run is 50x slower: their mean spans ~0
    out = tune(_spec(tmp_path, n_trials=16), SurfaceEvaluator(surface, seed=0), info=_info())
    vs = out.summary["validation"]["vs_defaults"]
    assert vs["ci95"] is None and vs["unbounded"], vs
    doc = _strict((tmp_path / "tune.json").read_text())  # no Infinity / NaN tokens
    assert doc["validation"]["vs_defaults"]["ci95"] is None
    best_yaml = (tmp_path / "best.yaml").read_text()
    assert UNBOUNDED_TEXT in best_yaml and "inf" not in best_yaml.replace("inferperf", "")
    assert "nan" not in (tmp_path / "trials.csv").read_text().lower()
    rep = build([tmp_path])
    line = next(s["text"] for s in rep.summary if s["kind"] == "tune")
    assert f"95 % CI {UNBOUNDED_TEXT}" in line, line


def test_the_report_reads_an_older_best_json_with_null_ends(tmp_path: Path) -> None:
    """Files written before the fix hold ``"ci95": [null, null]``: the report must still build."""
    surface = _surface()
    surface.planted["[]"] = 50.0
    tune(_spec(tmp_path, n_trials=16), SurfaceEvaluator(surface, seed=0), info=_info())
    best = json.loads((tmp_path / "best.json").read_text())
    best["run"]["tune_summary"]["validation"]["vs_defaults"].update(ci95=[None, None])
    best["run"]["tune_summary"]["validation"]["vs_defaults"].pop("unbounded", None)
    (tmp_path / "best.json").write_text(json.dumps(best))
    line = next(s["text"] for s in build([tmp_path]).summary if s["kind"] == "tune")
    assert UNBOUNDED_TEXT in line, line


def test_the_reports_tune_line_names_the_best_configuration_in_words(tmp_path: Path) -> None:
    """The summary line read ``best {'intra_op_num_threads': 1, 'concurrency': 1}: 1.478e+04 samples/s``:
    Python's repr of the dict and an exponent. It names each setting and writes the figure as the tables do."""
    tune(_spec(tmp_path, n_trials=16), SurfaceEvaluator(_surface(), seed=0), info=_info())
    line = next(s["text"] for s in build([tmp_path]).summary if s["kind"] == "tune")
    assert "{" not in line and "e+" not in line, line
    best = json.loads((tmp_path / "best.json").read_text())["run"]["tune_summary"]["best_config"]
    assert best and all(f"{k} {v}" in line for k, v in best.items()), (best, line)
