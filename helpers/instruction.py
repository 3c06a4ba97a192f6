"""What the user's instruction spells out: the phrases notebook 04's harness lets an agent type.

The instruction is the one text in an episode that comes from the user. Everything on a screen is untrusted;
so is everything the model writes. These functions read the instruction alone, with rules that name no task:

- a quoted phrase: `answer 'signed in'` (an apostrophe inside a word, as in "don't", opens no quote);
- a name: a capitalised word inside a sentence (not an acronym such as SKU), with the word after it when that
  is a plain lowercase word (`the Red mug`, `the Pencil set`, but `Umbrella.` alone);
- a number: `2`, or a number word up to ten;
- a credential: what follows `username`, `password` (also `password is`, `password:`, a quoted phrase) or
  `log in as`, which belongs in the box of that name and nowhere else.

Rules like these break on ordinary phrasings ("Get me two usb-c cables"); notebook 06 has the model read the
instruction into a typed goal that the user confirms (`helpers.goal`), and uses only `quoted` and `numbers` here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from helpers.world.effects import Effect
from helpers.runtime.concealer import conceal

QUOTED = re.compile(r"(?<![\w])'([^']+)'(?![\w])|\"([^\"]+)\"")
NUMBER = re.compile(r"(?<![\w.$])\d+(?![\w.])")
CREDENTIAL = re.compile(r"\b(username|password|log in as|sign in as)(?:\s+is|\s*:)?\s+(?:'([^']+)'|\"([^\"]+)\"|"
                        r"([^\s,.;()'\"]+))", re.IGNORECASE)
WORD = re.compile(r"[A-Za-z][\w-]*|[.!?]")
NUMBER_WORDS = {word: value for value, word in enumerate(
    "one two three four five six seven eight nine ten".split(), start=1)}
# How a message refers to a password, which goes back to the model, into traces and records: never by its value.
FROM_INSTRUCTION = "the password from your instruction"
# Words that end a name rather than continue it: "the Red mug or the Travel mug", "Search with the box empty".
STOPWORDS = frozenset("a an and are as at by cost costs for from in is it of on or than that the then to was "
                      "with".split())


def credentials(instruction: str) -> dict[str, str]:
    """Each credential the instruction gives, mapped to the box it is meant for: {'s3cret-example': 'Password'}."""
    found = {}
    for kind, *values in CREDENTIAL.findall(instruction):
        found[next(v for v in values if v)] = "Password" if kind.lower() == "password" else "Username"
    return found


def names(instruction: str) -> list[str]:
    found, words = [], WORD.findall(instruction)
    for i, word in enumerate(words):
        starts_sentence = i == 0 or words[i - 1] in ".!?"
        acronym = len(word) > 1 and word.isupper()  # SKU, URL: words of the task, not names in it
        if not word[0].isupper() or starts_sentence or acronym or word in ".!?":
            continue
        following = words[i + 1] if i + 1 < len(words) else ""
        joined = following.islower() and following.isalpha() and following not in STOPWORDS
        found.append(f"{word} {following}" if joined else word)
    return found


def quoted(instruction: str) -> list[str]:
    return [a or b for a, b in QUOTED.findall(instruction)]


def numbers(instruction: str) -> list[int]:
    """The numbers the instruction writes, in digits or as a word up to ten, in order."""
    found = [int(n) for n in NUMBER.findall(instruction)]
    found += [NUMBER_WORDS[w.lower()] for w in re.findall(r"[A-Za-z]+", instruction) if w.lower() in NUMBER_WORDS]
    return list(dict.fromkeys(found))


def phrases(instruction: str) -> list[str]:
    """Every phrase the instruction spells out, in order, without repeats."""
    found = quoted(instruction) + names(instruction) + NUMBER.findall(instruction) + list(credentials(instruction))
    return list(dict.fromkeys(found))


def passwords(instruction: str) -> list[str]:
    return [value for value, box in credentials(instruction).items() if box == "Password"]


def typing_asked_for(instruction: str, text: str, field: str) -> tuple[bool, str]:
    """Whether typing `text` into the box `field` is what the instruction asks for, and if not, why not. The reason
    names no password: it goes back to the model and into traces."""
    meant_for = credentials(instruction).get(text)
    if meant_for is not None and meant_for.lower() != field.lower():
        return False, (f"that is the {meant_for.lower()} from your instruction; it goes only into the {meant_for} "
                       "box")
    if text not in phrases(instruction):
        secret = set(passwords(instruction))
        sayable = [repr(p) for p in phrases(instruction) if p not in secret] + [FROM_INSTRUCTION] * bool(secret)
        return False, (f"'{conceal(text)}' is not in the user's instruction; type only what it says: "
                       f"{', '.join(sayable) or 'nothing'}")
    return True, ""


@dataclass(frozen=True)
class Instruction:
    """What the user asked for, read off the instruction's words, as the harness consults it: typing as
    `typing_asked_for` allows it; an effect that cannot be undone is left to the user, who is asked each time."""

    text: str

    def typing_allowed(self, text: str, box: str) -> tuple[bool, str]:
        return typing_asked_for(self.text, text, box)

    def effect_allowed(self, effect: Effect) -> tuple[bool, str]:
        return True, ""
