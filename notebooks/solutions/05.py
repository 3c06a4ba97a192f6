"""Worked solutions for notebook 05's exercises. In the notebook, `%load solutions/05.py` puts this file into a
cell; run it, then run the check cells again."""
from helpers.contract import PLAIN_TEXT

# Your turn 1: every string gets maxLength and the plain-text pattern (one character, one byte), the list
# maxItems, and every object its keys, `required` and `additionalProperties: false`. The longest event this
# allows is 190 bytes: a guided reply can always close inside 256 tokens.
bounded_event_schema = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40, "pattern": PLAIN_TEXT},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 12, "pattern": PLAIN_TEXT}},
        "where": {
            "type": "object",
            "properties": {
                "building": {"type": "string", "maxLength": 30, "pattern": PLAIN_TEXT},
                "room": {"type": "string", "maxLength": 10, "pattern": PLAIN_TEXT},
            },
            "required": ["building", "room"],
            "additionalProperties": False,
        },
    },
    "required": ["title", "tags", "where"],
    "additionalProperties": False,
}


# Your turn 2: sort, find the 0-based position 0.95 * (n - 1), and interpolate between its two neighbours.
def p95(values):
    """The 95th percentile, interpolating linearly between the two nearest ranks (numpy's default)."""
    ordered = sorted(values)
    position = 0.95 * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])
