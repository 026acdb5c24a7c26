"""The validity verdict (MLPerf's VALID/INVALID) and the notes every Result carries.

A run is INVALID when it stopped at the duration cap before both minimums
were met, when it has no successful query, or when its window medians are
unstable (CV across >= ``min_windows`` windows above the limit; the per-sample
CV is not used: tails inflate it).
"""

from __future__ import annotations

from ..stats import cv_percent


def verdict(
    count: int,
    duration_s: float,
    min_iterations: int,
    min_duration_s: float,
    max_duration_s: float,
    window_medians_ms: list[float],
    max_window_cv_percent: float,
    min_windows: int,
    errors: int = 0,
) -> tuple[bool, list[str], list[str]]:
    """Judge one measurement.

    Args:
        count: successful measured queries.
        duration_s: measurement wall time (s).
        min_iterations, min_duration_s, max_duration_s: the stop rule it ran under.
        window_medians_ms: median latency of each time window (ms); empty windows excluded.
        max_window_cv_percent: the most the window medians may vary (CV %).
        min_windows: fewer windows than this give no stability verdict (a note instead).
        errors: failed queries.

    Returns:
        (valid, reasons it is not, notes).
    """
    reasons: list[str] = []
    notes: list[str] = []
    if count == 0:
        reasons.append("no query completed")
    if count < min_iterations:
        reasons.append(
            f"stopped at the {max_duration_s:g} s cap after {count} of {min_iterations} queries:"
            " raise --max-duration-s or lower --iterations"
        )
    if duration_s < min_duration_s:
        reasons.append(f"measured {duration_s:.2f} s, under the {min_duration_s:g} s minimum")
    if errors:
        reasons.append(f"{errors} queries failed")
    if len(window_medians_ms) >= min_windows:
        cv = cv_percent(window_medians_ms)
        if cv == cv and cv > max_window_cv_percent:
            reasons.append(
                f"unstable: window medians vary by CV {cv:.1f} % (> {max_window_cv_percent:g} %):"
                " run longer, or quiet the machine"
            )
    else:
        notes.append(
            f"{len(window_medians_ms)} windows with samples: too few (< {min_windows}) for a stability verdict;"
            " run longer for one"
        )
    return not reasons, reasons, notes
