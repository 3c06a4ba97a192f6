"""The one walk over a JSON Schema and its one `$ref` resolver (helpers.runtime.schema_tree)."""
import pytest

from helpers.bounds import max_json_bytes
from helpers.contract import PLAIN_TEXT
from helpers.runtime.schema_tree import nodes, resolve, subschemas
from helpers.steps import STEP_SCHEMA, STEP_TOKENS


def test_each_node_is_a_schema_a_container_of_schemas_or_data():
    schema = {"properties": {"enum": {"type": "string"}, "const": {"const": {"pattern": "^x*$", "maxLength": 1}}},
              "anyOf": [{"type": "null"}], "x-guidance": {"whitespace_flexible": True}, "required": ["enum"],
              "items": [{"type": "integer"}], "$defs": {"A": {"enum": [{"type": "string"}]}}}
    assert {node.pointer: node.kind for node in nodes(schema)} == {
        "": "schema", "/properties": "schemas", "/properties/enum": "schema", "/properties/const": "schema",
        "/properties/const/const": "data", "/anyOf": "schemas", "/anyOf/0": "schema", "/x-guidance": "data",
        "/required": "data", "/items": "schemas", "/items/0": "schema", "/$defs": "schemas", "/$defs/A": "schema",
        "/$defs/A/enum": "data", "/$defs/A/enum/0": "data"}
    assert [path for path, _ in subschemas(schema)] == ["", "/properties/enum", "/properties/const", "/anyOf/0",
                                                        "/items/0", "/$defs/A"]


def test_a_schema_deeper_than_pythons_recursion_limit_is_walked():
    deep: dict = {"type": "string"}
    for _ in range(2000):
        deep = {"type": "object", "properties": {"a": deep}}
    assert sum(1 for _ in subschemas(deep)) == 2001


def test_a_node_is_expanded_only_after_its_reader_has_seen_it():
    schema = {"oneOf": [{"type": "string"}], "properties": {"a": {"type": "integer"}}}
    seen = []
    for path, node in subschemas(schema):
        seen.append(path)
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
            del node["properties"]
    assert seen == ["", "/anyOf/0"]


def test_a_reference_is_followed_within_the_schema_and_refused_anywhere_else():
    schema = {"$defs": {"a/b": {"$ref": "#/$defs/c~0d"}, "c~d": {"type": "integer"}},
              "definitions": {"x": {"type": "null"}}, "anyOf": [{"type": "string"}]}
    pointers = {path: node for path, node in subschemas(schema)}
    for pointer, node in pointers.items():
        assert resolve(schema, {"$ref": f"#{pointer}"}) is resolve(schema, node)
    assert resolve(schema, {"$ref": "#/$defs/a~1b"}) == {"type": "integer"}
    assert resolve(schema, {"$ref": "#/definitions/x"}) == {"type": "null"}
    assert resolve(schema, {"$ref": "#/anyOf/0"}) == {"type": "string"}
    assert resolve(schema, {"$ref": "#"}) is schema
    assert resolve(schema, {"type": "boolean"}) == {"type": "boolean"}
    for ref in ("#/$defs/missing", "#/anyOf/1", "other.json#/$defs/x"):
        with pytest.raises(ValueError, match=ref.split("#")[0] or "points to nothing"):
            resolve(schema, {"$ref": ref})
    circle = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}
    with pytest.raises(ValueError, match="leads to a schema"):
        resolve(circle, {"$ref": "#/$defs/a"})


def test_the_longest_reply_follows_references_wherever_they_point():
    assert max_json_bytes(STEP_SCHEMA) <= STEP_TOKENS
    word = {"type": "string", "maxLength": 3, "pattern": PLAIN_TEXT}
    assert max_json_bytes({"definitions": {"word": word}, "$ref": "#/definitions/word"}) == 5
    assert max_json_bytes({"$defs": {"word": word}, "type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/word"}}) \
        == len('["abc", "abc"]')
