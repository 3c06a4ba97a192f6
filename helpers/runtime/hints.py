"""A kernel that says which cell a missing name comes from: an IPython extension, loaded by every kernel of the
virtual environment `./workshop` makes (`install.kernel_config` writes the line that loads it).

A cell run before the Setup cell fails on `conn`, the connection the Setup cell makes: a bare `NameError` then gets
one more line saying to run the Setup cell first; any other missing name, to run the cells above in order. The
traceback stays as IPython shows it. Colab and a Jupyter started by hand load nothing of this: there the traceback
is all.
"""
from __future__ import annotations

from typing import Any

# What the Setup cell of every notebook defines.
SETUP_NAMES = frozenset({"conn"})


def hint(error: NameError) -> str:
    """The line that follows a NameError's traceback: where the missing name comes from."""
    name = getattr(error, "name", None)
    if name in SETUP_NAMES:
        return f"`{name}` comes from the Setup cell: run it first (the first code cell), then this cell again."
    return (f"`{name or 'this name'}` comes from a cell above this one, or from your own: run the cells above in "
            "order (Run > Run All Above Selected Cell), then this cell again.")


def load_ipython_extension(shell: Any) -> None:
    def explain(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        print(hint(value))

    shell.set_custom_exc((NameError,), explain)
