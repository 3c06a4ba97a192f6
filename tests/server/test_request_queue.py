"""The line in front of the model: first in, first out, bounded, and left by requests nobody waits for."""
import threading
import time

import pytest

from helpers.server.request_queue import LeftTheLine, QueueFull, RequestQueue


def hold(queue: RequestQueue, release: threading.Event) -> threading.Thread:
    """A request that takes the model and keeps it until `release` is set."""
    taken = threading.Event()

    def run():
        with queue.turn():
            taken.set()
            release.wait(10)

    thread = threading.Thread(target=run)
    thread.start()
    assert taken.wait(5)
    return thread


def wait_until(condition, seconds: float = 5.0, never: str = "condition never held") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, never
        time.sleep(0.01)


def test_waiting_requests_are_served_in_arrival_order():
    queue, release, served = RequestQueue(10), threading.Event(), []
    holder = hold(queue, release)

    def request(n):
        with queue.turn():
            served.append(n)

    waiters = []
    for n in range(6):
        waiters.append(threading.Thread(target=request, args=(n,)))
        waiters[-1].start()
        wait_until(lambda: queue.waiting == n + 1)
    release.set()
    for thread in [holder, *waiters]:
        thread.join(10)
    assert served == list(range(6)) and queue.waiting == 0 and not queue.busy


def test_a_full_line_refuses_at_once_with_a_retry_after():
    queue, release = RequestQueue(1), threading.Event()
    holder = hold(queue, release)
    waiter = threading.Thread(target=lambda: queue.turn().__enter__())
    waiter.start()
    wait_until(lambda: queue.waiting == 1)
    started = time.monotonic()
    with pytest.raises(QueueFull) as full:
        with queue.turn():
            pass
    assert time.monotonic() - started < 0.1 and 1 <= full.value.retry_after <= 60
    with pytest.raises(QueueFull):
        queue.check_room()
    release.set()
    holder.join(5)


def test_an_idle_model_takes_a_request_even_with_no_room_to_wait():
    queue = RequestQueue(0)
    queue.check_room()
    with queue.turn():
        assert queue.busy


def test_a_request_that_stops_waiting_leaves_the_line_and_the_next_one_moves_up():
    queue, release, gone = RequestQueue(5), threading.Event(), threading.Event()
    holder = hold(queue, release)
    outcome = {}

    def impatient():
        try:
            with queue.turn(lambda: "client_gone" if gone.is_set() else None):
                outcome["impatient"] = "served"
        except LeftTheLine as left:
            outcome["impatient"] = left.reason

    thread = threading.Thread(target=impatient)
    thread.start()
    wait_until(lambda: queue.waiting == 1)
    gone.set()
    thread.join(5)
    assert outcome == {"impatient": "client_gone"} and queue.waiting == 0
    release.set()
    holder.join(5)
    with queue.turn():
        pass


def test_retry_after_grows_with_the_line():
    queue, release = RequestQueue(10), threading.Event()
    holder = hold(queue, release)
    short = queue.retry_after()
    waiters = [threading.Thread(target=lambda: queue.turn().__enter__()) for _ in range(4)]
    for waiter in waiters:
        waiter.start()
    wait_until(lambda: queue.waiting == 4)
    assert queue.retry_after() > short
    release.set()
    holder.join(5)


def test_a_negative_limit_is_refused():
    with pytest.raises(ValueError):
        RequestQueue(-1)
