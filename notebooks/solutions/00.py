"""Worked solutions for notebook 00's exercises. In the notebook, `%load solutions/00.py` puts this file into a
cell; run it, then run the check cells again."""

# The notebook's schema, repeated so that this file also runs on its own.
city_schema = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "country": {"type": "string", "maxLength": 40},
    },
    "required": ["city", "country"],
    "additionalProperties": False,
}

# Your turn 1: NIM 1.x reads guided JSON from a top-level `nvext` object of the request body; the openai
# client sends fields it does not know through `extra_body`. Arguments the client knows, such as temperature,
# stand beside it.
nim_fields = {"temperature": 0, "extra_body": {"nvext": {"guided_json": city_schema}}}

# Your turn 2: an enum for the value, `required` so the key cannot be left out, and
# `additionalProperties: false` so nothing else can be added.
verdict_schema = {
    "type": "object",
    "properties": {"verdict": {"enum": ["yes", "no"]}},
    "required": ["verdict"],
    "additionalProperties": False,
}
