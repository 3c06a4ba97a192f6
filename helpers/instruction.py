"""What the user's instruction spells out: the phrases an agent may type or answer with, and the secrets it hands over.

The instruction is the one text in an episode that comes from the user. Everything on a screen is untrusted;
so is everything the model writes. These functions read the instruction alone, with rules that name no task:

- a quoted phrase: `answer 'signed in'` (one to answer with, not to type);
- a name: a capitalised word inside a sentence (not an acronym such as SKU), with the word after it when that
  is a plain lowercase word (`the Red mug`, `the Pencil set`, but `Umbrella.` alone);
- a number: `Order 2 ...`;
- an order: what to order and how many (`Order 2 Pencil set`, `Order one Umbrella`);
- a credential: the word after `username` or `password`, which belongs in the box of that name and nowhere else.
"""
from __future__ import annotations

import re

QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")
TO_ANSWER = re.compile(r"\banswer\s+(?:'([^']+)'|\"([^\"]+)\")", re.IGNORECASE)
NUMBER = re.compile(r"(?<![\w.$])\d+(?![\w.])")
CREDENTIAL = re.compile(r"\b(username|password)\s+([^\s,.;]+)", re.IGNORECASE)
WORD = re.compile(r"[A-Za-z][\w-]*|[.!?]")
ORDER = re.compile(r"\border\s+(?:(\d+|one|two|three|four|five|six|seven|eight|nine|ten|an?)\s+)?(?:the\s+)?",
                   re.IGNORECASE)
NUMBER_WORDS = {word: value for value, word in enumerate(
    "one two three four five six seven eight nine ten".split(), start=1)}
# Words that end a name rather than continue it: "the Red mug or the Travel mug", "Search with the box empty".
STOPWORDS = frozenset("a an and are as at by cost costs for from in is it of on or than that the then to was "
                      "with".split())


def credentials(instruction: str) -> dict[str, str]:
    """Each credential the instruction gives, mapped to the box it is meant for: {'lovelace42': 'Password'}."""
    return {value: kind.capitalize() for kind, value in CREDENTIAL.findall(instruction)}


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


def orders(instruction: str) -> dict[str, int]:
    """What the instruction says to order, and how many: {'Pencil set': 2} for "Order 2 Pencil set" (a number
    in digits or a word up to ten; none, or "a", is one). A name mentioned otherwise ("the price of the Mug") is
    not an order."""
    found = {}
    for match in ORDER.finditer(instruction):
        count, rest = match.group(1), instruction[match.end():]
        name = next((n for n in names(instruction) if rest.startswith(n)), None)
        if name is not None:
            found[name] = int(count) if count and count.isdigit() else NUMBER_WORDS.get((count or "one").lower(), 1)
    return found


def quoted(instruction: str) -> list[str]:
    return [a or b for a, b in QUOTED.findall(instruction)]


def answer_phrases(instruction: str) -> list[str]:
    """The phrases the instruction says to answer with (`answer 'signed in'`): words to say, not to type."""
    return [a or b for a, b in TO_ANSWER.findall(instruction)]


def phrases(instruction: str) -> list[str]:
    """Every phrase the instruction spells out, in order, without repeats."""
    found = quoted(instruction) + names(instruction) + NUMBER.findall(instruction) + list(credentials(instruction))
    return list(dict.fromkeys(found))


def typing_asked_for(instruction: str, text: str, field: str) -> tuple[bool, str]:
    """Whether typing `text` into the box `field` is what the instruction asks for, and if not, why not."""
    meant_for = credentials(instruction).get(text)
    if meant_for is not None and meant_for.lower() != field.lower():
        return False, f"'{text}' is the {meant_for.lower()} the user gave; it goes only into the {meant_for} box"
    if text not in phrases(instruction):
        return False, (f"'{text}' is not in the user's instruction; type only what it says: "
                       f"{', '.join(repr(p) for p in phrases(instruction)) or 'nothing'}")
    return True, ""
