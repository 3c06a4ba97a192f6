"""Every exercise check prints one verdict line: praise when solved, the hint when not."""
from helpers.exercises import check


def test_a_solved_exercise_gets_the_praise(capsys):
    check(True, "well done.", "try again")
    assert capsys.readouterr().out == "✅ Solved: well done.\n"


def test_an_unsolved_exercise_gets_the_hint(capsys):
    check(False, "well done.", "read the error first.")
    assert capsys.readouterr().out == "❌ Not yet: read the error first.\n"
