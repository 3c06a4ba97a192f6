"""The real server under hostile HTTP, a flood and a fuzz: every client gets an answer, and the server keeps serving.

These run on a server of their own, with a small queue (4), a short socket timeout (2 s) and head timeout (8 s), so
that the limits are reached quickly. Every loop is bounded in count and time, and only 127.0.0.1 is contacted.
"""
import concurrent.futures
import json
import re
import socket
import time
import urllib.error
import urllib.request

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from body_strategies import bodies, near_valid
from helpers.runtime.client import embedded_client
from helpers.runtime.embedded import LOG, MODEL_ID, Running, health, start_server, stop_server
from test_request_queue import wait_until  # pytest puts tests/server/ on the path
from test_slow_clients import Tricklers

pytestmark = pytest.mark.integration
QUEUE, SOCKET_TIMEOUT, HEAD_TIMEOUT = 4, 2, 8
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def port() -> Running:
    """A server of these tests' own (the folder of a free port), with a small queue and short timeouts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    yield start_server(free, extra_args=("--queue", str(QUEUE), "--socket-timeout", str(SOCKET_TIMEOUT),
                                         "--head-timeout", str(HEAD_TIMEOUT)))
    stop_server(free)


def post(port: Running, body: dict | bytes, timeout: float = 120) -> tuple[int, dict | None]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(port.url + "/chat/completions", data=data,
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {port.key}"})
    try:
        with DIRECT.open(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw.startswith(b"{") else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def small(seed: int = 0, **fields) -> dict:
    return {"model": MODEL_ID, "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 4,
            "seed": seed, **fields}


def head(port: Running) -> bytes:
    """A request line and the headers this server asks of every POST: its own address as Host, its key, a JSON body."""
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer %s\r\nConnection: close\r\n" % (port.port, port.key.encode()))


def raw_exchange(port: Running, data: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port.port), timeout=SOCKET_TIMEOUT * 5) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("headers,status", [
    (b"Content-Length: 10000000000\r\n\r\n{}", 413), (b"Content-Length: -5\r\n\r\n{}", 400),
    (b"Content-Length: abc\r\n\r\n{}", 400), (b"\r\n{}", 411), (b"Content-Length: 10\r\n\r\n{}", 408),
], ids=["huge", "negative", "not-a-number", "missing", "body-then-silence"])
def test_a_lying_content_length_is_answered_and_the_server_keeps_serving(port, headers, status):
    assert raw_exchange(port, head(port) + headers) == status
    assert post(port, small())[0] == 200


def test_a_flood_of_clients_each_get_an_answer_and_health_still_answers(port):
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        outcomes = list(pool.map(lambda seed: post(port, small(seed)), range(24)))
    statuses = [status for status, _ in outcomes]
    assert set(statuses) <= {200, 429} and statuses.count(200) >= 1
    assert statuses.count(429) >= 1, "24 clients against a queue of 4 should find it full"
    assert all(body["error"]["code"] == "server_busy" for status, body in outcomes if status == 429)
    assert health(port)["queue"]["waiting"] == 0


def test_the_workshop_client_waits_out_a_full_queue_instead_of_failing(port):
    client = embedded_client(port.url, port.key)

    def ask(seed):
        return client.chat.completions.create(**small(seed)).choices[0].finish_reason

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        assert set(pool.map(ask, range(10))) <= {"stop", "length"}


def busy(port: Running) -> bool | None:
    """Whether the model decodes now; None while /health is not answered (every connection slot may be taken)."""
    answer = health(port)
    return None if answer is None else answer["queue"]["busy"]


def test_a_client_that_hangs_up_stops_its_decoding(port):
    body = json.dumps(small(max_tokens=4000, messages=[{"role": "user", "content": "Write a very long story."}]))
    wait_until(lambda: busy(port) is False, 60, "an earlier test's reply never ended")
    with socket.create_connection(("127.0.0.1", port.port)) as sock:
        sock.sendall(head(port) + b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
        # Hang up only once the model decodes: a client that leaves while its request waits or is prepared
        # (seconds, on a loaded machine) takes another path, the queue's.
        wait_until(lambda: busy(port) is True, 60, "the long story never started decoding")
    log = port.folder / LOG
    wait_until(lambda: "client gone (Cancelled)" in log.read_text(), 20, "no 'client gone (Cancelled)' in the log")
    wait_until(lambda: busy(port) is False, 20, "the server still decodes for nobody")


def test_a_deadline_ends_the_reply_like_max_tokens(port):
    status, answer = post(port, small(max_tokens=4000, x_deadline_s=0.5,
                                      messages=[{"role": "user", "content": "Write a very long story."}]))
    assert status == 200 and answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] < 4000


def fuzzed(body: dict) -> dict:
    """A fuzzed body, kept cheap: a few tokens at most, and a deadline."""
    return {**body, "max_tokens": 3, "x_deadline_s": 10} if isinstance(body, dict) else body


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(near_valid, bodies).map(fuzzed))
def test_fuzzed_bodies_get_a_200_or_an_openai_shaped_4xx(port, body):
    status, answer = post(port, body, timeout=60)
    assert status == 200 or 400 <= status < 500, f"{status}: {answer}"
    if status != 200:
        assert set(answer["error"]) == {"message", "type", "param", "code"} and answer["error"]["message"]


def served_while(port: int, hostile: dict) -> tuple[int, dict]:
    """Send `hostile`, then an ordinary request while it is in flight; the hostile request's answer, once the
    ordinary one has had its 200 within a minute (the old server gave neither an answer within two)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        hostile_answer = pool.submit(post, port, hostile)
        time.sleep(0.5)
        assert post(port, small(), timeout=60)[0] == 200
        return hostile_answer.result(timeout=60)


def test_a_long_stop_string_is_refused_and_another_client_is_served_meanwhile(port):
    status, answer = served_while(port, small(max_tokens=200, stop=["x" * 200_000],
                                              messages=[{"role": "user", "content": "Write a long story."}]))
    assert status == 400 and "at most 64 characters" in answer["error"]["message"]


def test_a_schema_nested_600_levels_deep_is_a_400_not_a_500(port):
    schema: dict = {"type": "string"}
    for _ in range(300):
        schema = {"type": "object", "properties": {"a": schema}}
    status, answer = post(port, small(guided_json=schema))
    assert (status, answer["error"]["code"]) == (400, "schema_too_deep")
    assert post(port, small())[0] == 200


def test_a_huge_prompt_is_refused_before_tokenising_and_another_client_is_served_meanwhile(port):
    status, answer = served_while(port, small(messages=[{"role": "user", "content": "word " * (900_000 // 5)}]))
    assert (status, answer["error"]["code"]) == (400, "context_length_exceeded")
    assert re.search(r"no prompt over \d+ bytes fits", answer["error"]["message"])  # not "the prompt is N tokens"


def test_a_body_over_the_cap_is_refused_before_it_is_read(port):
    # The review's body: 300,000 one-character messages, 9 MB, once read for seconds before any limit.
    body = json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "a"}] * 300_000}).encode()
    status, answer = post(port, body, timeout=30)
    assert (status, answer["error"]["code"]) == (413, "body_too_large")
    many = json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "a"}] * 20_000}).encode()
    assert len(many) < 2**20
    status, answer = post(port, many, timeout=30)
    assert (status, answer["error"]["code"]) == (400, "too_many_messages")


def test_a_request_without_the_key_is_refused(port):
    body = json.dumps(small()).encode()
    without = head(port).replace(b"Authorization: Bearer %s\r\n" % port.key.encode(), b"")
    assert raw_exchange(port, without + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)) == 401


@pytest.mark.parametrize("replace,by,status", [
    (b"Host: 127.0.0.1:", b"Host: rebound.example:", 421),
    (b"Content-Type: application/json\r\n", b"Content-Type: application/json\r\nOrigin: https://page.example\r\n", 403),
    (b"Content-Type: application/json", b"Content-Type: text/plain", 415),
], ids=["host", "origin", "content-type"])
def test_a_request_a_web_page_could_send_is_refused(port, replace, by, status):
    body = json.dumps(small()).encode()
    request = head(port).replace(replace, by) + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    assert raw_exchange(port, request) == status
    assert raw_exchange(port, head(port) + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)) == 200


def test_sixty_trickling_keyless_clients_do_not_keep_the_owner_waiting(port):
    """About 10 s and one small model call. The review's attack (issue 47): 60 clients without the key send their heads
    a byte a second, within the socket timeout; the owner's /health and a small completion, with the key, are
    answered at once (on the old server /health did not answer at all), and each trickler is cut with a 408 at the
    head's deadline (`--head-timeout`)."""
    keyless = head(port).replace(b"Authorization: Bearer %s\r\n" % port.key.encode(), b"")
    tricklers = Tricklers(("127.0.0.1", port.port), keyless, 60, every=1.0)
    try:
        time.sleep(1.5)
        begun = time.monotonic()
        assert health(port, timeout=5) is not None, "the owner's /health did not answer"
        health_s = time.monotonic() - begun
        assert post(port, small(), timeout=30)[0] == 200
        completion_s = time.monotonic() - begun - health_s
        assert health_s < 2 and completion_s < 5, (health_s, completion_s)
        assert tricklers.none_answered(), "the tricklers were cut before the owner was served"
        answers = tricklers.answers()
        assert {status for status, _ in answers} == {408}
        assert all(HEAD_TIMEOUT - 0.5 < seconds < HEAD_TIMEOUT + 3 for _, seconds in answers), answers
    finally:
        tricklers.close()
