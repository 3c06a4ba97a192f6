import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.server.stop_strings import StopScanner


def feed_all(stops, pieces):
    scanner = StopScanner(stops)
    shown = "".join(scanner.feed(p) for p in pieces)
    if not scanner.stopped:
        shown += scanner.flush()
    return shown, scanner.stopped, scanner.text


def test_no_stops_passes_everything_through():
    assert feed_all([], ["a", "b"]) == ("ab", False, "ab")


def test_cut_before_the_stop_string():
    assert feed_all(["END"], ["one ", "two END three"]) == ("one two ", True, "one two ")


def test_stop_string_split_across_pieces_is_never_shown():
    scanner = StopScanner(["</answer>"])
    shown = [scanner.feed(p) for p in ["42 </ans", "wer> more"]]
    assert shown == ["42 ", ""] and scanner.stopped and scanner.text == "42 "


def test_a_held_prefix_that_does_not_complete_is_released():
    assert feed_all(["END"], ["E", "N", "x"]) == ("ENx", False, "ENx")


def test_earliest_of_several_stops_wins():
    assert feed_all(["b", "a"], ["xxab"]) == ("xx", True, "xx")


def reference(stops, pieces):
    """What the scanner has shown after each piece, by brute force: all but the longest tail that could still begin
    a stop string, until the first piece that completes one, which cuts the text at the earliest start."""
    text, shown = "", []
    for piece in pieces:
        text += piece
        starts = [text.find(s) for s in stops if s in text]
        if starts:
            return shown + [text[:min(starts)]], True
        held = max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        shown.append(text[:len(text) - held])
    return shown + [text], False


@settings(max_examples=300)
@given(st.lists(st.text("ab", min_size=1, max_size=5), max_size=4),
       st.lists(st.text("abc", max_size=6), max_size=8))
def test_the_scanner_shows_what_the_brute_force_reference_shows_and_nothing_after_a_stop(stops, pieces):
    scanner = StopScanner(stops)
    outputs = [scanner.feed(piece) for piece in pieces] + [scanner.flush()]
    shown = ["".join(outputs[:i + 1]) for i in range(len(outputs))]
    expected, stopped = reference(stops, pieces)
    assert shown[:len(expected)] == expected and scanner.stopped is stopped
    assert set(shown[len(expected):]) <= {expected[-1]} and scanner.text == expected[-1]


def test_a_long_stop_string_costs_each_token_the_same_small_work():
    # The old scan cost 0.28 s a token with a 100,000-character stop string held back (quadratic in its length);
    # 2,000 tokens of it would take about 9 minutes. Each character now costs a constant step per stop string.
    stop = "x" * 100_000 + "!"
    finished = threading.Event()

    def scan() -> None:
        scanner = StopScanner([stop])
        shown = "".join(scanner.feed("x" * 50) for _ in range(2_020)) + scanner.feed("!")
        if shown == scanner.text == "x" * 1_000 and scanner.stopped:
            finished.set()

    threading.Thread(target=scan, daemon=True).start()
    assert finished.wait(60), "2,000 tokens against one long stop string took over a minute"
