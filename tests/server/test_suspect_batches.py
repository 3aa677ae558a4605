"""SuspectBatches with real threads: a suspect batch waits until no other thread holds a batch, the
others wait out its perform, and a second suspect meanwhile is refused (its thread gives it back)."""

from __future__ import annotations

import threading
import time

import pytest
from timing_support import wait_until

from lowkiq.server.suspect_batches import SuspectBatches


@pytest.mark.slow
def test_a_suspect_waits_for_the_other_holders_and_keeps_new_takes_out_until_released():
    iso, stop = SuspectBatches(), threading.Event()
    assert iso.hold("a", stop) and iso.hold("b", stop)  # both threads hold a batch
    claimed = threading.Event()

    def suspect():
        assert iso.claim("a", stop)
        claimed.set()

    t = threading.Thread(target=suspect)
    t.start()
    wait_until(lambda: iso.claimed_by_other("b"))
    time.sleep(0.2)
    assert not claimed.is_set()  # b still holds its batch
    assert not iso.claim("c", stop)  # a second suspect elsewhere must go back to its queue
    iso.let_go()  # b acknowledged
    t.join(5)
    assert claimed.is_set()
    took = threading.Event()

    def taker():
        assert iso.hold("b", stop)
        took.set()

    t2 = threading.Thread(target=taker)
    t2.start()
    time.sleep(0.2)
    assert not took.is_set()  # no take while the suspect is performed
    iso.release("a")
    t2.join(5)
    assert took.is_set() and not iso.claimed_by_other("b")


@pytest.mark.slow
def test_stopping_ends_every_wait():
    iso, stop = SuspectBatches(), threading.Event()
    assert iso.hold("a", stop) and iso.hold("b", stop)
    results = {}
    t = threading.Thread(target=lambda: results.update(claim=iso.claim("a", stop)))
    t.start()
    wait_until(lambda: iso.claimed_by_other("c"))
    waiter = threading.Thread(target=lambda: results.update(hold=iso.hold("c", stop)))
    waiter.start()
    time.sleep(0.2)
    assert results == {}  # both wait: b still holds, a has the claim
    stop.set()
    t.join(5)
    waiter.join(5)
    assert results["claim"] is False and "hold" in results and not iso.claimed_by_other("c")
