"""A cell run before the Setup cell says what to do, in a real IPython shell (issue 49). Instant."""
from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from helpers.runtime import hints


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    hints.load_ipython_extension(shell)
    yield shell
    shell.set_custom_exc((), None)
    InteractiveShell.clear_instance()


def test_a_cell_run_before_the_setup_cell_is_told_to_run_it(shell, capsys):
    result = shell.run_cell("reply = conn.client.chat.completions.create(model=conn.model, messages=[])")
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, NameError) and "NameError" in out
    assert out.rstrip().endswith("`conn` comes from the Setup cell: run it first (the first code cell), then this "
                                 "cell again.")


def test_another_missing_name_points_to_the_cells_above(shell, capsys):
    shell.run_cell("print(record.outcome)")
    assert "`record` comes from a cell above this one" in capsys.readouterr().out


def test_other_errors_are_shown_as_they_were(shell, capsys):
    shell.run_cell("1 / 0")
    out = capsys.readouterr().out
    assert "ZeroDivisionError" in out and "comes from" not in out
