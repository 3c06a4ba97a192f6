"""Worked solutions for notebook 05's exercises. In the notebook, `%load solutions/05.py` puts this file into a
cell; run it, then run the check cells again."""
from helpers.contract import PLAIN_TEXT


# Your turn 1: the skeleton's easy cases, then the two the learner writes. anyOf: the values of each branch, added
# up. An object: every combination of its properties' values (multiply), a property outside `required` once more
# (it may be left out); and unless `additionalProperties` is false, any other key with any value: too many.
def count_replies(schema):
    """How many JSON values `schema` allows, or None when there are too many to count."""
    if "const" in schema:
        return 1
    if "enum" in schema:
        return len(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):  # ["boolean", "null"]: the values of each type, as an anyOf
        return count_replies({"anyOf": [{**schema, "type": one} for one in kind]})
    if kind == "integer" and "minimum" in schema and "maximum" in schema:
        return schema["maximum"] - schema["minimum"] + 1  # both ends included
    if "anyOf" in schema:
        counts = [count_replies(branch) for branch in schema["anyOf"]]
        return None if None in counts else sum(counts)
    if kind == "object":
        if schema.get("additionalProperties", True) is not False:
            return None  # it also takes keys it does not name
        total = 1
        for name, field in schema.get("properties", {}).items():
            count = count_replies(field)
            if count is None:
                return None
            total *= count if name in schema.get("required", []) else count + 1  # or left out
        return total
    return {"boolean": 2, "null": 1}.get(kind)  # free text, any number, an integer missing a bound: None


# Your turn 2: every string gets maxLength and the plain-text pattern (one character, one byte), the list
# maxItems, and every object its keys, `required` and `additionalProperties: false`. The longest event this
# allows is 190 bytes: a guided reply can always close inside 256 tokens. A stricter pattern, such as
# "^[A-Za-z0-9 :]*$" for the title, passes too: it lets through plain text only.
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
