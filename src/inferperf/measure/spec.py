"""What ``inferperf bench`` is asked to do, as one validated spec: the model, its BenchConfig, and what the run
adds around it (a soak, pre/post stages, an A/B pair or a runtime comparison, the gates).

:meth:`BenchSpec.check` refuses contradictions itself, so :func:`run_bench` (the library call behind the command)
gets the same checks as the CLI; the command only maps its flags onto the spec and renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import Result

DEFAULT_MODEL = "zoo:resnet50"


@dataclass
class BenchSpec:
    """One bench to run.

    Attributes:
        model: ONNX path or ``zoo:NAME``. cfg: the settings (already layered: defaults < file < flags).
        soak_s: exactly this many measured seconds and an RSS leak verdict (None: no soak). backends: a comma list
        of runtimes to compare (None: ``cfg.backend``). ab: BASE CURRENT models in ABBA rounds. pre / post /
        pre_input: ``module:function`` stages and their raw items. history: the Result goes into a history
        database. fail_on_leak / fail_on_invalid: the gates (:func:`gate_message`).
    """

    model: str = DEFAULT_MODEL
    cfg: BenchConfig | None = None
    soak_s: float | None = None
    backends: str | None = None
    ab: tuple[str, str] | None = None
    pre: str | None = None
    post: str | None = None
    pre_input: str | None = None
    history: bool = False
    fail_on_leak: bool = False
    fail_on_invalid: bool = False

    @property
    def compare(self) -> bool:
        """A runtime comparison (``--backend a,b``)."""
        return self.backends is not None and "," in self.backends

    def check(self) -> BenchSpec:
        """Refuse what cannot run together; returns self with ``cfg`` filled (defaults) and set for the soak.

        Raises:
            UsageError: an empty model, ``--fail-on-leak`` without a soak, a soak of <= 0 s or without the sampler,
                ``--history`` or ``--pre``/``--post`` with an A/B pair or a comparison.
        """
        from .soak import soak_config

        if not self.model.strip():
            raise UsageError("empty model argument: pass an .onnx path or zoo:NAME (or nothing for zoo:resnet50)")
        if self.fail_on_leak and self.soak_s is None:
            raise UsageError("--fail-on-leak needs --soak-s N (a soak without a duration)")
        self.cfg = self.cfg or BenchConfig()
        if self.soak_s is not None:
            self.cfg = soak_config(self.cfg, self.soak_s)
        several = self.ab is not None or self.compare
        if self.history and several:
            raise UsageError("--history adds one bench Result: drop --ab or the backend list, and add their folders "
                             "with `inferperf history add`")
        if (self.pre or self.post or self.pre_input) and several:
            raise UsageError("--pre/--post measure one model on one runtime: drop --ab or the backend list")
        return self


def run_bench(spec: BenchSpec, *, command: list[str] | None = None, live: Any = None,
              on_run: Callable[[int, int, Result], None] | None = None) -> Result:
    """Check ``spec`` and measure its one model on its one runtime (:func:`.bench.bench`), with the soak verdict
    in ``metrics.resources.soak`` when it soaks. ``live`` / ``on_run``: progress, as :func:`.bench.bench` takes.
    An A/B pair or a comparison is several Results: the command runs those (:mod:`inferperf.measure.ab`,
    :mod:`inferperf.measure.runtimes`).

    Raises:
        UsageError: as :meth:`BenchSpec.check`, :func:`.staged.make_staging` and :func:`.bench.bench`.
    """
    from .bench import bench
    from .soak import apply_bench_soak

    spec.check()
    assert spec.cfg is not None
    if spec.ab is not None or spec.compare:
        raise UsageError("run_bench measures one model on one runtime: an --ab pair or a backend list is several")
    staging = None
    if spec.pre or spec.post or spec.pre_input:
        from .staged import make_staging

        staging = make_staging(spec.pre, spec.post, spec.pre_input, spec.cfg.workload.input_pool_size)
    result = bench(spec.model, spec.cfg, live=live, command=command, on_run=on_run, staging=staging)
    if spec.soak_s is not None:
        apply_bench_soak(result)
    return result


def gate_message(spec: BenchSpec, result: Result) -> str | None:
    """Why the command exits 3, or None: a leak (``fail_on_leak``), an INVALID Result (``fail_on_invalid``)."""
    soak = getattr(result.metrics.resources, "soak", None)
    if spec.fail_on_leak and soak and soak.get("verdict") == "leak":
        return f"--fail-on-leak: {soak['rss']['reason']}"
    if spec.fail_on_invalid and not result.validity.valid:
        return f"result is INVALID ({'; '.join(result.validity.reasons)}) and --fail-on-invalid is set"
    return None


__all__ = ["DEFAULT_MODEL", "BenchSpec", "gate_message", "run_bench"]
