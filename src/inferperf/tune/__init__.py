"""``inferperf tune``: Bayesian search (Optuna) for the fastest configuration under a latency SLO.

:func:`~inferperf.tune.run.tune` is the entry point; the space is :class:`~inferperf.tune.space.TuneSpace`,
the goal :class:`~inferperf.tune.objective.Goal`, a trial's measurement :mod:`inferperf.tune.trial`,
the shared storage and budget :mod:`inferperf.tune.study`, validation :mod:`inferperf.tune.validate`.
"""
