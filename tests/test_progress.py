"""Text progress: every item passes through in order, a line about every tenth, a final count, no carriage returns."""
import re

from helpers.runtime.progress import progress, said_by_progress, waiting

SECONDS = r"\d+\.\d s"


def lines(capsys) -> list[str]:
    out = capsys.readouterr().out
    assert "\r" not in out  # a carriage return is what turns a saved output into garbled bar fragments
    return out.splitlines()


def test_a_sized_iterable_gets_a_line_each_tenth_and_a_final_count(capsys):
    assert list(progress(range(20), desc="questions")) == list(range(20))
    printed = lines(capsys)
    assert [line.split(",")[0] for line in printed[:-1]] == [f"questions: {n}/20" for n in range(2, 20, 2)]
    assert all(re.fullmatch(rf"questions: \d+/20, {SECONDS}", line) for line in printed[:-1])
    assert re.fullmatch(rf"questions: 20/20 done in {SECONDS}", printed[-1])


def test_fewer_items_than_tenths_get_a_line_each(capsys):
    list(progress(["a", "b", "c"], desc="episodes"))
    assert [line.split(",")[0].split(" done")[0] for line in lines(capsys)] == [
        "episodes: 1/3", "episodes: 2/3", "episodes: 3/3"]


def test_an_unsized_iterable_counts_without_a_total(capsys):
    assert sum(progress((n for n in range(25)), desc="replies")) == sum(range(25))
    printed = lines(capsys)
    assert [line.split(",")[0] for line in printed[:-1]] == ["replies: 10", "replies: 20"]
    assert re.fullmatch(rf"replies: 25 done in {SECONDS}", printed[-1])


def test_total_and_every_can_be_given_as_with_tqdm(capsys):
    list(progress(iter(range(6)), total=6, every=3))
    assert [line.split(",")[0].split(" done")[0] for line in lines(capsys)] == ["3/6", "6/6"]


def test_an_empty_run_still_says_it_finished(capsys):
    assert list(progress([], desc="nothing")) == []
    assert re.fullmatch(rf"nothing: 0/0 done in {SECONDS}", lines(capsys)[0])


def test_waiting_says_what_the_room_waits_for_on_one_line(capsys):
    waiting("the model: 4 steps")
    assert capsys.readouterr().out == "waiting for the model: 4 steps ...\n"


def test_every_line_this_module_prints_is_recognised_and_no_other(capsys):
    list(progress(range(3), desc="governed runs"))
    list(progress(iter(range(12))))
    waiting("the model: 4 steps")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and all(said_by_progress(line) for line in lines)
    assert not any(said_by_progress(line) for line in ("valid steps: [True] | success: False", "token 3: 12 of 31",
                                                      "seed 2: 1 x Pencil set, $11.95", "waiting for nothing"))
