"""Waiting is bounded, releases the GIL, and Ctrl-C interrupts it: SIGINT during a wait
raises KeyboardInterrupt within a second, and other threads run while it waits."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import atoll
from atoll import ops


def test_sigint_interrupts_a_wait(client: atoll.Client) -> None:
    @atoll.function(client.slice(1), atoll.f32[1])
    def slow(x):
        return ops.spin(x, 20e6)  # 20 s on the device

    run = client.run(slow, [1.0])
    with pytest.raises(atoll.DeadlineExceeded, match=r"result 0 of run \d+ was not ready "
                       r"within 0.2 s"):
        run.result(timeout=0.2)
    ticks = 0
    sent_at = []

    def interrupt() -> None:
        nonlocal ticks
        end = time.monotonic() + 0.5
        while time.monotonic() < end:  # runs only while the wait holds no GIL
            ticks += 1
        sent_at.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run.result(timeout=30)
    interrupted = time.monotonic()
    assert sent_at, "interrupted before the signal was sent"
    assert interrupted - sent_at[0] < 1.0, f"took {interrupted - sent_at[0]:.2f} s"
    assert ticks > 10000, "the other thread barely ran: the wait held the GIL"
    run.cancel()
    with pytest.raises(atoll.Cancelled):
        run.result(timeout=10)
