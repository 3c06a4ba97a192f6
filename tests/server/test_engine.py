"""The engine's decisions that need no model: how many threads a fast-forward batch may take."""
import os

import pytest

from helpers.server.engine import idle_cores


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
