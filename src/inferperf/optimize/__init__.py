"""``inferperf optimize``: precision and graph-optimization variants measured against fp32.

Modules, one job each:

* :mod:`.spec` - plain-data options (:class:`OptimizeOptions`), variant names, accuracy gates.
* :mod:`.data` - calibration / evaluation inputs: ``.npz``, an image folder, or synthetic.
* :mod:`.convert` - builds the variant files (fp16, int8-dynamic, int8-static, ort-*), checked and loaded.
* :mod:`.accuracy` - runs fp32 and a variant on the same inputs and compares the outputs.
* :mod:`.sensitivity` - ranks nodes by the quantization error they add; auto-exclusion.
* :mod:`.verdict` - one honest verdict per variant from its speed, accuracy and the CPU's ISA flags.
* :mod:`.run` - :func:`optimize`, the library entry point that ties them together, one function per step.
* :mod:`.report` - what it returns: one row per variant (:class:`VariantReport`) and the summary document.

The runtime and its quantization / float16 tools are imported inside the
functions that need them, never at ``import inferperf``.
"""

from __future__ import annotations

from typing import Any


def optimize(model: Any, options: Any = None, **kwargs: Any) -> Any:
    """Build, check and measure variants of ``model``; see :func:`inferperf.optimize.run.optimize`."""
    from .run import optimize as _optimize

    return _optimize(model, options, **kwargs)


__all__ = ["optimize"]
