"""Issue 36 item 1, before/after: the fleet the search chooses vs an exhaustive scan (chosen/exhaustive per cell), on
the synthetic service of tests/unit/test_plan.py (1 ms +- 10 % at batch 1, 1.6 ms at batch 4; SLO p99 3 ms; random
routing; 2,000 arrivals a point), the rate set for fleets of 9 ... 170 replicas. Runs against either layout: this
tree (analysis/fleet.py) or a checkout before issue 36 (plan/search.py), e.g.

    python benchmarks/plan_fleet_sizes.py                                   # after
    git worktree add /tmp/before ee78ea8 && cd /tmp/before && \
        PYTHONPATH=/tmp/before/src:/tmp/before python /path/to/benchmarks/plan_fleet_sizes.py   # before
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))  # tests.plan_results of the tree run from
from tests.plan_results import base_result, measured
try:
    from inferperf.analysis.fleet import PlanOptions, Simulator, options_for, size_fleet, capacity_per_s
    from inferperf.analysis.candidates import candidates
    which = "after"
except ImportError:
    from inferperf.plan.search import PlanOptions, Simulator, options_for, size_fleet, capacity_per_s
    from inferperf.plan.service import candidates
    which = "before"
base = base_result(Path(tempfile.mkdtemp()))
rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0, seed=1)), (Path("b4.json"), measured(base, 4, 1, 1, 1.6, seed=4))]
for k in (0, 1):
    opt = options_for(candidates(rs), PlanOptions(1.0, 3.0))[k]
    one = Simulator(PlanOptions(1.0, 3.0, requests=2000), None)
    lo, hi = 1.0, capacity_per_s(opt)
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if one.meets(one.predict(opt, mid, 1)) else (lo, mid)
    row = []
    for want in (9, 11, 13, 19, 40, 100, 170):
        sim = Simulator(PlanOptions((want - 0.5) * lo, 3.0, requests=2000), None)
        size_fleet(opt, sim)
        r = 1
        while not sim.meets(sim.predict(opt, sim.opts.planned_rate_per_s, r)):
            r += 1
        row.append(f"{opt.replicas}/{r}")
    print(which, "batching on" if k else "batching off", " ".join(row))
