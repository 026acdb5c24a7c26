"""DESIGN: when CI=true, a skipped test whose dependency .ci/run installs counts as a failure."""

from __future__ import annotations

import pytest

INNER = """
import pytest

pytest.importorskip("json")  # present: this module is collected

def test_passes():
    pass

@pytest.mark.skipif(True, reason="needs torch, not installed")
def test_marked_skip():
    pass

def test_skips_inside():
    pytest.skip("chromium not installed")

@pytest.mark.ci_may_skip
def test_allowed_skip():
    pytest.skip("perf_analyzer lives in its own venv")

@pytest.mark.xfail(reason="known", strict=False)
def test_xfail():
    assert False
"""

MODULE_SKIP = 'import pytest\npytest.importorskip("no_such_module_for_inferperf")\n\ndef test_x():\n    pass\n'


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the inner runs need no installed plugin
    pytester.makeconftest("from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n")
    pytester.makeini("[pytest]\nmarkers =\n    ci_may_skip: allowed\n")
    pytester.makepyfile(test_inner=INNER)
    return pytester


def test_skips_are_skips_outside_ci(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    r = inner.runpytest_inprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1, skipped=3, xfailed=1)
    assert r.ret == 0


def test_skips_fail_under_ci_true(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    r = inner.runpytest_inprocess("-p", "no:cacheprovider", "-rA")
    # the skipif mark skips in setup (an error), pytest.skip in the call (a failure), the module at collection
    r.assert_outcomes(passed=1, failed=1, errors=1, skipped=1, xfailed=1)
    assert r.ret != 0
    out = r.stdout.str()
    assert "CI=true: skipped (needs torch, not installed)" in out
    assert "CI=true: skipped (chromium not installed)" in out


def test_module_skipped_at_collection_fails_under_ci(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    inner.makepyfile(test_module_skip=MODULE_SKIP)
    monkeypatch.delenv("CI", raising=False)
    inner.runpytest_inprocess("-p", "no:cacheprovider", "test_module_skip.py").assert_outcomes(skipped=1)
    monkeypatch.setenv("CI", "true")
    r = inner.runpytest_inprocess("-p", "no:cacheprovider", "test_module_skip.py")
    r.assert_outcomes(errors=1)
    assert "CI=true: skipped (could not import 'no_such_module_for_inferperf'" in r.stdout.str()
