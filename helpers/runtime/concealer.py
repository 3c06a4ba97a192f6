"""The passwords known to be secret, and the one concealer every record, repr and view goes through.

It sits in the runtime, below everything that shows text (a model's reply, the world's pages, the widgets), and
knows only what it is told: the simulated store registers its account password when an app gets it, and notebook
06 the password the user confirmed in a goal. Nothing here reads an instruction's wording: "passcode s3cret-example",
"pw s3cret-example" and "the password of s3cret-example" hide the same password, because the store knows it
whatever the phrasing.

`conceal` replaces every known password, in any case and in the spellings a record writes it (as is, inside a JSON
string, in a URL), by one fixed mark: no letter and no length. What a reader sees (a repr, a trace, an episode's
record, the step-through widget, a tool output, a committed file) goes through it. The messages the model reads
are not concealed: the user gave the model the password to sign in with.
"""
from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Iterable, Iterator
from urllib.parse import quote, quote_plus

CONCEALED = "[password]"
_known: set[str] = set()


def register(password: str | None) -> None:
    """Make `password` one that `conceal` hides from now on, in this process."""
    if password:
        _known.add(password)


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Within the block the concealer knows no password but those registered in it, and afterwards exactly those it
    knew before: for a test whose passwords must not leak into another test's text, nor another's into its own."""
    before = set(_known)
    _known.clear()
    try:
        yield
    finally:
        _known.clear()
        _known.update(before)


def _spellings(secret: str) -> list[str]:
    return list(dict.fromkeys([secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
                               quote(secret), quote_plus(secret)]))


def conceal(text: str, also: Iterable[str] = ()) -> str:
    """`text` with every registered password (and each of `also`) replaced by CONCEALED, longest first, so that a
    password inside a longer one goes with it."""
    secrets = sorted({s for s in (*_known, *also) if s}, key=len, reverse=True)
    if not secrets or not text:
        return text
    spellings = sorted({spelling for s in secrets for spelling in _spellings(s)}, key=len, reverse=True)
    return re.sub("|".join(map(re.escape, spellings)), CONCEALED, text, flags=re.IGNORECASE)


def concealing(cls: type) -> type:
    """A class decorator: the class's repr (and its str, where it has its own) conceal every known password. For a
    dataclass, put it above `@dataclass`, so that it wraps the repr the dataclass writes."""
    for name in ("__repr__", "__str__"):
        shown = getattr(cls, name)
        if name == "__str__" and shown is object.__str__:
            continue  # str() falls back to the concealing repr
        setattr(cls, name, functools.wraps(shown)(lambda self, shown=shown: conceal(shown(self))))
    return cls
