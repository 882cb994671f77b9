"""Sampling turns: round robin between sessions on a bounded number of slots, with idle time
left when the server is busy, and pages that redraw less often then."""

from __future__ import annotations

import threading
import time

from app import scheduler


def test_turns_go_round_in_order_and_never_exceed_the_slots():
    turns = scheduler.Turns(slots=1)
    order, busy, most = [], [0], [0]
    lock = threading.Lock()
    start = threading.Barrier(3)

    def worker(name):
        start.wait()
        for _ in range(20):
            with turns.turn():
                with lock:
                    busy[0] += 1
                    most[0] = max(most[0], busy[0])
                    order.append(name)
                time.sleep(0.002)
                with lock:
                    busy[0] -= 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and len(order) == 60
    # once all three are queued, nobody takes two turns while another waits
    middle = order[6:54]
    assert all(x != y for x, y in zip(middle, middle[1:], strict=False)), "".join(order)
    assert {order[i : i + 3].count("a") for i in range(6, 51, 3)} == {1}


def test_two_slots_let_two_workers_sample_at_once():
    turns = scheduler.Turns(slots=2)
    inside, most = [0], [0]
    lock = threading.Lock()

    def worker():
        for _ in range(10):
            with turns.turn():
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.003)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 2


def test_a_busy_turn_keeps_its_slot_idle_for_a_share_of_its_time():
    turns = scheduler.Turns(slots=1)
    started = time.perf_counter()
    with turns.turn(idle_share=1.0):
        time.sleep(0.05)
    assert time.perf_counter() - started >= 0.095  # the body, then as long again idle
    assert scheduler.idle_share(scheduler.BUSY_ABOVE) == 0.0
    assert scheduler.idle_share(scheduler.BUSY_ABOVE + 1) == scheduler.BUSY_IDLE_SHARE


def test_pages_redraw_less_often_only_when_many_runs_share_the_server():
    full = scheduler.SESSIONS_AT_FULL_RATE
    assert scheduler.refresh_interval(1) == scheduler.refresh_interval(full) == scheduler.REFRESH_S
    assert scheduler.refresh_interval(2 * full) == 2 * scheduler.REFRESH_S


def test_turns_are_long_alone_and_shorter_only_as_far_as_every_page_needs():
    # alone (or as many runs as slots): long turns, so a call's fixed cost is amortised
    assert scheduler.turn_seconds(1, slots=1) == scheduler.TURN_S >= 0.02
    assert scheduler.turn_seconds(3, slots=3) == scheduler.TURN_S
    for slots in (1, 3, 15):
        for running in range(1, 41):
            turn = scheduler.turn_seconds(running, slots)
            assert scheduler.MIN_TURN_S <= turn <= scheduler.TURN_S
            # two rounds of turns (idle time included) fit in one redraw interval, unless the
            # turns are as short as they go
            one_round = running / slots * turn * (1 + scheduler.idle_share(running))
            fits = 2 * one_round <= scheduler.refresh_interval(running) + 1e-12
            assert fits or turn == scheduler.MIN_TURN_S, (slots, running, turn)
    assert scheduler.turn_seconds(8, slots=1) < scheduler.turn_seconds(4, slots=1)
