"""Notebook 03's checks judge what issue 48 found them judging wrong, and their hints say what they saw.

An `ask_user` that adds words to the user's reply ("User approved. ") fails: the model reads every word of the
result as the user's, and notebooks 04 and 06 teach that a permission must come from the user alone. One that frames
the question for a person, and hands back the reply unchanged, passes. A trim that is wrong at one `n` only is told
the case it failed, not the first case it passed.
"""
from helpers.exercises import nb03


def test_an_ask_user_that_adds_a_permission_to_the_reply_fails_and_the_hint_says_why():
    solved, _, hint = nb03.user_handlers(nb03._approved_prefix)
    assert not solved
    assert "handed back 'User approved. reply-" in hint and "permission never given" in hint and "unchanged" in hint


def test_an_ask_user_that_frames_the_question_for_a_person_passes():
    assert nb03.user_handlers(nb03._framed_question)[0]


def test_the_hint_for_a_question_not_put_to_the_user_quotes_what_the_user_was_asked():
    solved, _, hint = nb03.user_handlers(nb03._own_question)
    assert not solved and "'Is everything all right?'" in hint


def test_a_handler_that_keeps_the_first_reply_fails_on_the_second_question():
    solved, _, hint = nb03.user_handlers(nb03._first_reply_kept)
    assert not solved and "handed back 'reply-" in hint


def test_a_trim_wrong_only_at_n_0_is_told_the_case_it_failed():
    solved, _, hint = nb03.trim_keep_first(nb03._slice_minus_n)
    assert not solved
    assert "n=0" in hint and "I-----" in hint and "yours gives IIIIII" in hint and "I--III" not in hint
