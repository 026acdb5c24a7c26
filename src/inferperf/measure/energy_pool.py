"""Energy over repeated runs of one case: the runs' ``metrics.energy`` blocks (:mod:`.energy`) pooled, as the
runner pools their samples."""

from __future__ import annotations

from typing import Any

from ..stats import mean_ci


def pool_energy(blocks: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """``metrics.energy`` over repeated runs of one case: per domain measured in every run, energies, windows and
    inferences summed, ``joules_per_inference`` = summed active energy / summed inferences, each run's figure in
    ``per_run`` and Student's t 95 % interval over runs (:func:`inferperf.stats.mean_ci`) in
    ``joules_per_inference_ci95``; a domain any run lacks is listed as the first run lists it. None: no block."""
    present = [b for b in blocks if b]
    if not present:
        return None
    first = present[0]
    if len(present) != len(blocks):
        return first
    out: dict[str, Any] = {"window_s": None, "inferences": None, "idle_s": None, "domains": [],
                           "notes": list(dict.fromkeys(n for b in present for n in b["notes"]))}
    if all(b["window_s"] is not None for b in present):
        out.update(window_s=sum(b["window_s"] for b in present), inferences=sum(b["inferences"] for b in present),
                   idle_s=sum(b["idle_s"] or 0 for b in present) if any(b["idle_s"] for b in present) else None)
    for row in first["domains"]:
        rows = [next((r for r in b["domains"] if r["domain"] == row["domain"]), None) for b in present]
        if row["status"] != "measured" or any(r is None or r["status"] != "measured" for r in rows):
            out["domains"].append(row)
            continue
        energy_j = sum(r["energy_j"] for r in rows)
        pooled = {**row, "energy_j": energy_j, "power_w": energy_j / out["window_s"] if out["window_s"] else None,
                  "per_run": [r["joules_per_inference"] for r in rows]}
        idles = [r["idle_power_w"] for r in rows]
        if all(x is not None for x in idles):
            active = sum(r["active_energy_j"] for r in rows)
            pooled.update(idle_power_w=sum(idles) / len(idles), idle_power_w_ci95=None, active_energy_j=active)
            per_run = [x for x in pooled["per_run"] if x is not None]
            if out["inferences"] and len(per_run) == len(rows) > 1:
                pooled.update(joules_per_inference=active / out["inferences"],
                              joules_per_inference_ci95=list(mean_ci(per_run)))
        out["domains"].append(pooled)
    return out


__all__ = ["pool_energy"]
