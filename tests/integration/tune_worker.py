"""One tune worker process on a shared study (tests/integration/test_tune_storage.py): the fake-clock surface,
a real storage. Prints its pass as JSON on its last line."""

import json
import sys
from pathlib import Path

from inferperf.backends.null import LatencySurface
from inferperf.config import BenchConfig, WarmupOptions
from inferperf.system import collect_system
from inferperf.tune.objective import Goal
from inferperf.tune.run import TuneSpec, tune
from inferperf.tune.simulate import SurfaceEvaluator
from inferperf.tune.space import TuneSpace
from inferperf.tune.trial import TrialPlan

storage, study, out, seed, n_trials = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
info = collect_system().model_copy(update={"effective_cpus": 4, "cgroup_cpu_limit": None})
space = TuneSpace(intra_op_num_threads=[1, 2, 4], concurrency=[1, 2, 4], session_mode=["shared", "per-stream"],
                  execution_mode=["sequential", "parallel"], max_oversubscription=2.0)
spec = TuneSpec(model="null", base=BenchConfig(backend="null", warmup=WarmupOptions(iterations=2)), space=space,
                goal=Goal("throughput", slo_p99_ms=30.0, effective_cpus=4), plan=TrialPlan(duration_s=1.0),
                n_trials=n_trials, output=out, seed=seed, storage=storage, study_name=study, validate=False)
surface = LatencySurface(base_ms=20.0, cpus=4, noise_cv=0.04)
o = tune(spec, SurfaceEvaluator(surface, seed=seed, sleep_s=0.3), info=info)
p = o.search
print(json.dumps({"measured": p.measured, "pruned": p.pruned, "cached": p.cached, "stop": p.stop_reason}))
