"""Energy of one load step (issue 31 item 2): the machine's RAPL / NVML counters over the step, idle power before
it, joules per answered request (:mod:`inferperf.measure.energy`).

The counters are this machine's: they meter the server only when it runs here (a loopback or local target),
and then a package counter counts the load client too (client and server share the socket): the block says
so. A target on another machine gets every domain unavailable with that reason, and no idle second is spent.
The window is the whole step (warm-up and wind-down included), so ``inferences`` counts every request
answered (2xx) in it, not only the measured ones.
"""

from __future__ import annotations

import ipaddress
import socket
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ..measure.energy import EnergyMeter, EnergyWindow, energy_block, measure_idle, unavailable_block


def target_is_local(url: str) -> bool:
    """True when ``url``'s host is this machine: a loopback address, ``localhost``, or one of this host's
    names or addresses (no DNS beyond the resolver's answer for this machine's own name)."""
    host = urlsplit(url).hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback or host in _own_addresses()
    except ValueError:
        return host == "localhost" or host == socket.gethostname()


def _own_addresses() -> set[str]:
    try:
        return {str(a[4][0]) for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()


class StepEnergy:
    """Opened before a step (idle power read then), entered around it, turned into ``metrics.energy`` after.

    Args:
        url: the target's base URL.
        idle_s: seconds of idle power before the step (0 = none).
        meter: an already opened meter (tests); default :meth:`EnergyMeter.open`.
    """

    def __init__(self, url: str, idle_s: float, meter: EnergyMeter | None = None) -> None:
        self.idle_s = idle_s
        self.why_not = None if target_is_local(url) else (
            f"the target {urlsplit(url).hostname} is another machine: this machine's counters do not meter it")
        self.meter = (meter or EnergyMeter.open()) if self.why_not is None else None
        self.idle = (measure_idle(self.meter, idle_s) if self.meter is not None and self.meter.domains
                     and idle_s > 0 else None)
        self.window: EnergyWindow | None = None

    def metering(self) -> AbstractContextManager[Any]:
        """The context to run the step in."""
        if self.meter is None:
            return nullcontext()
        self.window = EnergyWindow(self.meter)
        return self.window

    def block(self, status: np.ndarray) -> dict[str, Any]:
        """``metrics.energy`` for the step whose responses' HTTP ``status`` (one per request, int) is given."""
        if self.meter is None or self.window is None:
            return unavailable_block(self.why_not or "the step did not run")
        answered = int(np.count_nonzero((status >= 200) & (status < 300)))
        return energy_block(self.meter, self.idle, self.idle_s, self.window.window_s, answered,
                            client_shares_package=True)

    def close(self) -> None:
        """Let go of the counters (NVML)."""
        if self.meter is not None:
            self.meter.close()
