"""tune's exploration stream is seeded from recorded values, the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys

from inferperf.tune.search import exploration_seed

_SNIPPET = "from inferperf.tune.search import exploration_seed; print(exploration_seed('machine-abc', 12))"


def test_exploration_seed_is_the_same_under_any_hash_seed() -> None:
    seeds = set()
    for hash_seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", _SNIPPET], env=env, capture_output=True, text=True,
                             check=True, timeout=60)
        seeds.add(int(out.stdout.strip()))
    assert seeds == {exploration_seed("machine-abc", 12)}


def test_exploration_seed_depends_on_its_inputs() -> None:
    assert exploration_seed("machine-abc", 12) != exploration_seed("machine-abc", 13)
    assert exploration_seed("machine-abc", 12) != exploration_seed("machine-abd", 12)
