"""significance: hand-computed corrections, the Fieller interval, the seeded bootstrap, degenerate inputs."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from inferperf import significance as sg
from inferperf.stats import intervals_separate


# --- multiple comparisons --------------------------------------------------------------------------------------


def test_holm_hand_values():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max 0.02, 0.03, 0.06, 0.06
    out = sg.holm([0.01, 0.04, 0.03, 0.005])
    assert out.pvalues == pytest.approx((0.03, 0.06, 0.06, 0.02))
    assert out.reject == (True, False, False, True) and out.method == "holm" and out.alpha == 0.05
    assert sg.holm([0.5, 0.5]).pvalues == (1.0, 1.0)  # 2 x 0.5 = 1, clipped and carried
    assert sg.holm([]).pvalues == () and sg.holm([]).reject == ()


def test_benjamini_hochberg_hand_values():
    # 4 p-values: m p_(i) / i = 0.02, 0.02, 0.04, 0.04; running min from the top leaves them
    out = sg.benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    assert out.pvalues == pytest.approx((0.02, 0.04, 0.04, 0.02)) and out.reject == (True,) * 4
    assert sg.benjamini_hochberg([0.01, 0.04, 0.03, 0.005], alpha=0.03).reject == (True, False, False, True)
    # 8 p-values: 8 p / i = .008 .032 .104 .082 .0672 .08 .0846 .205; running min from the top
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205]
    out = sg.benjamini_hochberg(p)
    assert out.pvalues == pytest.approx((0.008, 0.032, 0.0672, 0.0672, 0.0672, 0.08, 0.074 * 8 / 7, 0.205))
    assert out.reject == (True, True) + (False,) * 6
    assert sg.holm(p).reject == (True, False, False, False, False, False, False, False)  # Holm is stricter
    assert sg.adjust(p, "bh") == out and sg.adjust(p) == sg.holm(p)


def test_corrections_refuse_bad_input():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        sg.holm([0.1, float("nan")])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        sg.benjamini_hochberg([1.5])
    with pytest.raises(ValueError, match="alpha"):
        sg.holm([0.1], alpha=0)
    with pytest.raises(ValueError, match="holm or bh"):
        sg.adjust([0.1], "bonferroni")  # type: ignore[arg-type]


# --- Fieller ratio of means ------------------------------------------------------------------------------------


def test_fieller_hand_values():
    cur, base = [10, 11, 12, 11], [9, 10, 9.5, 10.5]
    a, b = 11.0, 9.75
    va, vb = (2 / 3) / 4, (1.25 / 3) / 4  # sample variances / n
    r = a / b
    df = (va + r * r * vb) ** 2 / (va**2 / 3 + r**4 * vb**2 / 3)
    t = sps.t.ppf(0.975, df)
    half = t * math.sqrt(a * a * vb + b * b * va - t * t * va * vb)
    ci = sg.mean_ratio_ci(cur, base)
    assert ci.estimate == pytest.approx(r) and ci.method == "Fieller" and ci.n == (4, 4)
    assert (ci.low, ci.high) == pytest.approx(((a * b - half) / (b * b - t * t * vb), (a * b + half) / (b * b - t * t * vb)))
    # the defining property: at both ends (a - r b)^2 = t^2 (va + r^2 vb)
    for end in (ci.low, ci.high):
        assert (a - end * b) ** 2 == pytest.approx(t * t * (va + end * end * vb))
    assert ci.low < 1.0 < ci.high  # 13 % up, but four runs do not show it


def test_fieller_covers_true_ratio_and_handles_edges():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(300):
        ci = sg.mean_ratio_ci(rng.normal(110, 6, 5), rng.normal(100, 5, 5))
        hits += ci.low <= 1.1 <= ci.high
    assert 0.92 <= hits / 300 <= 0.99
    flat = sg.mean_ratio_ci([2.0, 2.0], [1.0, 1.0])
    assert (flat.low, flat.high) == (2.0, 2.0) and flat.notes
    wild = sg.mean_ratio_ci([1.0, 1.1, 0.9], [-1.0, 1.0, 0.5])  # baseline mean not clearly above 0
    assert wild.low == -math.inf and wild.high == math.inf and "unbounded" in wild.notes[0]
    assert not intervals_separate(wild.as_pair(), [5.0, 6.0])
    with pytest.raises(ValueError, match="positive baseline mean"):
        sg.mean_ratio_ci([1.0, 2.0], [-1.0, -2.0])
    with pytest.raises(ValueError, match="at least 2"):
        sg.mean_ratio_ci([1.0], [1.0, 2.0])


# --- the one bootstrap -----------------------------------------------------------------------------------------


def test_bootstrap_log_ratio_se_is_seeded_and_near_the_delta_method():
    rng = np.random.default_rng(11)
    cur, base = rng.normal(110, 8, 40), rng.normal(100, 5, 40)
    se = sg.bootstrap_log_ratio_se(cur, base)
    assert se == sg.bootstrap_log_ratio_se(cur, base, seed=0)  # same seed, same value
    assert se != sg.bootstrap_log_ratio_se(cur, base, seed=1)
    # delta method: var(log mean) ~ var / (n mean^2), with the plug-in (ddof=0) variance the bootstrap resamples
    delta = math.sqrt(cur.var() / (cur.size * cur.mean() ** 2) + base.var() / (base.size * base.mean() ** 2))
    assert se == pytest.approx(delta, rel=0.1)


def test_bootstrap_log_ratio_se_edges():
    assert sg.bootstrap_log_ratio_se([2.0, 2.0, 2.0], [1.0, 1.0]) == pytest.approx(0.0, abs=1e-12)  # no spread
    assert sg.bootstrap_log_ratio_se([1.0, 2.0], [-5.0, -4.0, 1.0]) == math.inf  # baseline means mostly <= 0
    assert sg.bootstrap_log_ratio_se([1.0, float("nan")], [1.0, 2.0]) == math.inf  # 3 in 4 resamples hold the NaN
    with pytest.raises(ValueError, match="baseline has shape \\[0\\]"):
        sg.bootstrap_log_ratio_se([1.0], [])
    with pytest.raises(ValueError, match="too few"):
        sg.bootstrap_log_ratio_se([1.0, 2.0], [1.0, 2.0], n_resamples=10)


def test_every_public_function_is_used_by_inferperf():
    """No function here that no command calls (issue 25 item 4 removed four such)."""
    import ast
    import inspect
    from pathlib import Path

    src = Path(sg.__file__).parent
    def names(tree: ast.AST) -> set[str]:
        return {n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else a.name
                for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Name, ast.ImportFrom))
                for a in (n.names if isinstance(n, ast.ImportFrom) else [n])}

    used = set().union(*(names(ast.parse(f.read_text())) for f in src.rglob("*.py") if f.name != "significance.py"))
    own = [f for f in ast.parse(Path(sg.__file__).read_text()).body if isinstance(f, ast.FunctionDef)]
    for _ in own:  # a function called by a used one here is used (adjust -> holm, benjamini_hochberg)
        used |= set().union(*(names(f) - {f.name} for f in own if f.name in used))
    public = {name for name, obj in vars(sg).items() if inspect.isfunction(obj) and not name.startswith("_")
              and obj.__module__ == sg.__name__}
    assert public and not public - used, f"unused: {sorted(public - used)}"


def test_import_does_not_pull_scipy():
    code = "import sys, inferperf.significance; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_the_t_tests_live_here_and_agree_with_scipy() -> None:
    """Issue 38 item 2: changepoints, the history gate and Fieller each had a t-test of their own."""
    import numpy as np
    import pytest
    from scipy import stats as st

    from inferperf.significance import pooled_t_pvalue, prediction_t_pvalue, welch_t_pvalue

    rng = np.random.default_rng(1)
    a, b = rng.normal(10, 1, 12), rng.normal(10.8, 1.5, 9)
    assert pooled_t_pvalue(a, b) == pytest.approx(st.ttest_ind(a, b, equal_var=True).pvalue)
    assert welch_t_pvalue(a, b, 1.0) == pytest.approx(st.ttest_ind(b, a, equal_var=False, alternative="greater").pvalue)
    assert welch_t_pvalue(a, b, -1.0) == pytest.approx(st.ttest_ind(b, a, equal_var=False, alternative="less").pvalue)
    k, x = a.size, 12.5
    t = (x - a.mean()) / (a.std(ddof=1) * np.sqrt(1 + 1 / k))
    assert prediction_t_pvalue(x, a, 1.0) == pytest.approx(st.t.sf(t, k - 1))
    assert pooled_t_pvalue([], b) == 1.0 and np.isnan(welch_t_pvalue([1.0], b)) and np.isnan(prediction_t_pvalue(1.0, [1.0]))
    assert pooled_t_pvalue([1.0, 1.0], [2.0, 2.0]) == 0.0 and prediction_t_pvalue(2.0, [1.0, 1.0]) == 0.0
