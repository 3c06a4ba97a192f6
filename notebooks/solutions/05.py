"""Worked solutions for notebook 05's exercises. In the notebook, `%load solutions/05.py` puts this file into a
cell; run it, then run the check cells again."""
from helpers.contract import PLAIN_TEXT


# Your turn 1: a const is one value, an enum one per entry, a boolean two, null one; an object allows every
# combination of its properties' values (multiply), anyOf the values of each branch (add); anything else, such as
# free text or a number, allows too many to count.
def count_replies(schema):
    """How many JSON values `schema` allows, or None when a part of it is free."""
    if "const" in schema:
        return 1
    if "enum" in schema:
        return len(schema["enum"])
    if "anyOf" in schema:
        counts = [count_replies(branch) for branch in schema["anyOf"]]
        return None if None in counts else sum(counts)
    if schema.get("type") == "object":
        total = 1
        for field in schema["properties"].values():
            count = count_replies(field)
            if count is None:
                return None
            total *= count
        return total
    if schema.get("type") == "integer" and "minimum" in schema and "maximum" in schema:
        return schema["maximum"] - schema["minimum"] + 1  # both ends included
    return {"boolean": 2, "null": 1}.get(schema.get("type"))


# Your turn 2: every string gets maxLength and the plain-text pattern (one character, one byte), the list
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
