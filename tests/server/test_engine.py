"""The engine's decisions that need no model: how many threads a fast-forward batch may take, and which prompts are
too long to render."""
import os
from types import SimpleNamespace

import pytest

from helpers.server.engine import Engine, idle_cores
from helpers.server.protocol import RequestError


@pytest.fixture
def loadavg(tmp_path):
    def write(runnable: int):
        path = tmp_path / "loadavg"
        path.write_text(f"0.44 0.18 0.40 {runnable}/78 16083\n")
        return path
    return write


def test_a_core_is_idle_when_fewer_tasks_can_run_than_there_are_cores(loadavg):
    cores = len(os.sched_getaffinity(0))
    assert idle_cores(loadavg(1)) == cores - 1
    assert idle_cores(loadavg(cores)) == 0


def test_more_runnable_tasks_than_cores_is_no_idle_core_not_a_negative_one(loadavg):
    assert idle_cores(loadavg(len(os.sched_getaffinity(0)) + 3)) == 0


@pytest.mark.parametrize("content", [None, "", "garbage", "0.1 0.2 0.3 x/78 1"])
def test_without_a_readable_count_no_core_is_assumed_idle(tmp_path, content):
    path = tmp_path / "loadavg"
    if content is not None:
        path.write_text(content)
    assert idle_cores(path) == 0


def test_contents_too_long_for_the_context_are_refused_before_the_template_is_rendered():
    engine = Engine.__new__(Engine)  # the model's sizes, without the model: 10 tokens of at most 4 bytes
    engine.llm, engine.longest_token = SimpleNamespace(n_ctx=lambda: 10), 4

    def render(**kwargs):
        raise AssertionError("the chat template was rendered")

    engine.formatter = render
    with pytest.raises(RequestError, match="the prompt is 41 bytes; no prompt over 40 bytes") as caught:
        engine.prompt_tokens([{"role": "system", "content": "x" * 20}, {"role": "user", "content": "é" * 10 + "y"}])
    assert caught.value.code == "context_length_exceeded"
