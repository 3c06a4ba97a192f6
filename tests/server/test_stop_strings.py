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
