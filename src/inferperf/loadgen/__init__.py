"""``inferperf load``: HTTP load generation against any KServe v2 server (issue 13).

Closed loop (scenario Concurrent) and open loop (scenario Server) corrected for
coordinated omission, stress and capacity search, soak. Speaks HTTP only: this
package never imports ``inferperf.serve`` (the name ``inferperf.load`` is the
Result reader). Importing it imports no HTTP client.
"""

from __future__ import annotations

from .options import LoadConfig

__all__ = ["LoadConfig"]
