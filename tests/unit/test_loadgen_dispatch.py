"""The open loop's dispatcher behind its schedule (a burst, or a rate past what one process can create): it
still yields to the loop every ``CATCH_UP_SENDS`` sends, so requests go out, the span ends and a stop request
is heard (it had created every due request before any ran: at ~1e6 req/s a step never ended)."""

from __future__ import annotations

from typing import Any

from inferperf.clock import FakeClock
from inferperf.loadgen.driver import CATCH_UP_SENDS, Open, run_step
from inferperf.loadgen.transport import SimulatedServer
from tests.fake_loop import run_fake


class _Burst:
    """``n`` requests all due at time zero; counts the offsets handed out."""

    def __init__(self, n: int) -> None:
        self.n, self.given = n, 0

    def next_offset_ns(self) -> int | None:
        if self.given >= self.n:
            return None
        self.given += 1
        return 0

    def describe(self) -> dict[str, Any]:
        return {"arrival": "burst", "n": self.n}


def test_a_dispatcher_behind_its_schedule_lets_the_due_requests_go_out_as_it_creates_them() -> None:
    clock = FakeClock()
    burst = _Burst(2000)
    given_at_first_send: list[int] = []

    class Server(SimulatedServer):
        async def serve(self):  # noqa: ANN202
            if not given_at_first_send:
                given_at_first_send.append(burst.given)
            return await super().serve()

    server = Server(clock, service_s=0.001, slots=64)
    s = run_fake(clock, lambda: run_step(server, Open(burst, max_connections=64), clock=clock, warmup_s=0.0,
                                         duration_s=1.0, timeout_s=5.0, cpu=lambda: 0.0), timeout_s=600.0)  # fmt: skip
    assert given_at_first_send and given_at_first_send[0] <= CATCH_UP_SENDS + 1  # was 2000: all, then the first send
    assert len(s.scheduled_ns) == 2000 and (s.done_ns >= 0).all() and (s.error == 0).all()
