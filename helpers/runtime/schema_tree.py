"""A JSON Schema as a tree: every node with where it sits and what it is, and a local `$ref` resolved; and a place
in JSON data, named the way messages name it (`json_path`).

The one walk over a schema that its readers share: OpenAI's strict-subset checker and rewrite
(`helpers.runtime.strict_subset`), and the embedded server's limits and its pattern rewrite
(`helpers.server.guidance`). A node is a **schema** (a subschema), **schemas** (a map or list of them:
`properties`, `anyOf`...) or **data** (the value of `const`, `enum`, `default`, or of a keyword no
vocabulary of JSON Schema gives subschemas: a property named `pattern` is a schema, a `const` holding a
`pattern` key is not). The walk is iterative, so a schema nested deeper than Python's recursion limit is
walked, and lazy: a node is expanded only after its reader has seen it, so a reader that refuses a node
stops the walk there, and one that rewrites a node in place has its rewrite walked.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

NodeKind = Literal["schema", "schemas", "data"]

# Draft 2020-12's applicators, by the shape of their value; `items` as a list is the older drafts' tuple form.
SUBSCHEMA = frozenset({"items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains",
                       "propertyNames", "unevaluatedItems", "unevaluatedProperties"})
SUBSCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems", "items"})
SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


@dataclass(frozen=True)
class Node:
    """One object or array of a schema: its path of keys and indexes from the root, and what it is."""

    path: tuple[str | int, ...]
    value: dict | list
    kind: NodeKind

    @property
    def pointer(self) -> str:
        """Where the node is, as a JSON pointer without its '#': '/properties/a/anyOf/0'; '' for the root."""
        return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in self.path)


def _kind(parent: NodeKind, key: str | int, value: dict | list) -> NodeKind:
    if parent == "schemas":
        return "schema" if isinstance(value, dict) else "data"
    if parent == "schema":
        if (key in SUBSCHEMA_MAPS and isinstance(value, dict)) or (key in SUBSCHEMA_LISTS and isinstance(value, list)):
            return "schemas"
        if key in SUBSCHEMA and isinstance(value, dict):
            return "schema"
    return "data"


def nodes(schema: Any) -> Iterator[Node]:
    """Every object and array of `schema`, each before what it holds."""
    pending = [Node((), schema, "schema" if isinstance(schema, dict) else "data")] \
        if isinstance(schema, (dict, list)) else []
    while pending:
        node = pending.pop()
        yield node
        members = node.value.items() if isinstance(node.value, dict) else enumerate(node.value)
        pending += reversed([Node((*node.path, key), value, _kind(node.kind, key, value))
                             for key, value in members if isinstance(value, (dict, list))])


def subschemas(schema: Any) -> Iterator[tuple[str, dict]]:
    """Every subschema of `schema`, the root first, each with its JSON pointer."""
    return ((node.pointer, node.value) for node in nodes(schema) if node.kind == "schema")


def resolve(root: dict, node: Any) -> Any:
    """`node`, or the schema its `$ref` points to within `root` (followed to a node that is no reference);
    ValueError for a reference to another document, to nothing, or round in a circle."""
    followed: list[str] = []
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#") or ref in followed:
            raise ValueError(f"$ref {ref!r} is not a reference within this schema that leads to a schema")
        followed.append(ref)
        node = root
        for part in filter(None, unquote(ref[1:]).split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise ValueError(f"$ref {ref!r} points to nothing in this schema")
    return node


def json_path(location: tuple[str | int, ...]) -> str:
    """Where a value sits in JSON data, the way every message of the workshop names it, the contract's and the
    server's alike: ('items', 1, 'name') -> items[1].name."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location).lstrip(".")
