"""OpenAI's strict subset: the checker, the rewrite, and every schema the workshop sends.

No model and no server: the agent's schemas are recorded from scripted runs of every task in every configuration.
"""
import copy
import json
import re
import shutil
import subprocess
from functools import cache

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, ValidationError

from helpers.agent import CONFIGS, run_episode
from helpers.contract import ANSWER_JSON_SCHEMA
from helpers.goal import goal_schema
from helpers.grounding import grounded_step_schema, notes
from helpers.loop import ScriptedProposer
from helpers.screen_schema import per_screen_schema
from helpers.runtime.dialects import guided_json
from helpers.runtime.probes import probe_model
from helpers.runtime.schema_tree import subschemas
from helpers.runtime.strict_subset import (RULES, NotInStrictSubset, empty_alternatives, left_out_nulls, read_back,
                                           subset_problems, to_strict_subset)
from helpers.pydantic_contract import Answer
from helpers.steps import HAND_WRITTEN_STEP_SCHEMA, STEP_SCHEMA, Step
from helpers.world.store import CATALOG
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import instruction, load_tasks, start_app
from test_grounding import PUNCTUATION_FACTS, after_every_product_page  # pytest puts tests/ on the path

TASKS = load_tasks()


def test_todays_step_schema_is_not_in_the_subset_and_each_problem_cites_openai():
    problems = subset_problems(STEP_SCHEMA)
    assert any("oneOf" in p for p in problems)
    assert any("not required: press_enter" in p and RULES["required"] in p for p in problems)
    assert any("default is not a keyword" in p for p in problems)
    assert all("(OpenAI: \"" in p for p in problems)


def test_the_rewrite_puts_the_step_schema_in_the_subset_and_keeps_what_it_means():
    strict = to_strict_subset(STEP_SCHEMA)
    assert subset_problems(strict) == []
    assert "oneOf" not in json.dumps(strict) and "anyOf" in strict["properties"]["tool_call"]
    assert strict["$defs"]["WriteArgs"]["properties"]["press_enter"]["type"] == ["boolean", "null"]
    # maxLength and pattern stay: the grammar still closes every string
    assert strict["$defs"]["WriteArgs"]["properties"]["content"]["maxLength"] == 60
    assert STEP_SCHEMA["properties"]["tool_call"].get("oneOf"), "the rewrite must not change its input"


def test_null_for_an_optional_field_is_read_back_as_left_out_and_step_stays_strict():
    """`Step` is its contract: it refuses the null that STEP_SCHEMA refuses. The strict rewrite lets a server write
    that null, and the client reads it back once, as the reply arrives (`read_back`)."""
    written = {"note": None, "thought": "Search.", "tool_call": {"tool_name": "write", "content": "Red mug",
                                                                  "press_enter": None}}
    Draft202012Validator(to_strict_subset(STEP_SCHEMA)).validate(written)
    assert not Draft202012Validator(STEP_SCHEMA).is_valid(written)
    with pytest.raises(ValidationError):
        Step.model_validate(written)
    step = Step.model_validate_json(read_back(STEP_SCHEMA, json.dumps(written)))
    assert step.tool_call.press_enter is False and '"press_enter":false' in step.model_dump_json()
    assert read_back(STEP_SCHEMA, "not json") == "not json"


def test_every_rule_of_the_subset_is_checked():
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
              "additionalProperties": False}
    assert subset_problems(closed) == []
    cases = {
        "root": {"anyOf": [closed]},
        "additional": {**closed, "additionalProperties": True},
        "required": {**closed, "required": []},
        "unsupported": {**closed, "allOf": [closed]},
        "types": {**closed, "properties": {"a": {"type": "string", "uniqueItems": True}}},
        "formats": {**closed, "properties": {"a": {"type": "string", "format": "credit-card"}}},
        "enums": {**closed, "properties": {"a": {"enum": [f"v{i}" for i in range(1001)]}}},
        "big_enum": {**closed, "properties": {"a": {"enum": [f"{i:0>60}" for i in range(300)]}}},
    }
    for rule, schema in cases.items():
        assert any(RULES[rule] in p for p in subset_problems(schema)), rule
    deep = closed
    for _ in range(5):
        deep = {"type": "object", "properties": {"a": deep}, "required": ["a"], "additionalProperties": False}
    assert any(RULES["size"] in p for p in subset_problems(deep))


def test_what_cannot_be_rewritten_is_refused_with_every_reason():
    with pytest.raises(NotInStrictSubset) as refused:
        to_strict_subset({"anyOf": [{"type": "object"}], "not": {"type": "string"}})
    assert any("root" in p for p in refused.value.problems) and any("not is not" in p for p in refused.value.problems)
    with pytest.raises(NotInStrictSubset, match="empty enum allows nothing"):
        to_strict_subset({"type": "object", "properties": {"a": {"enum": []}}})


def closed(**properties) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


@pytest.mark.parametrize("schema, says", [
    (closed(a={"type": "array", "maxItems": 2, "items": {}}), "/properties/a/items: no type"),
    (closed(a={"type": "array", "maxItems": 2}), "/properties/a: an array without items"),
    (closed(a={"description": "anything at all"}), "/properties/a: no type"),
    ({**closed(a={"type": "string"}), "type": ["object", "null"]}, "the root: the root is not an object"),
], ids=["typeless-items", "no-items", "only-a-description", "nullable-root"])
def test_what_openai_refuses_is_never_called_strict(schema, says):
    with pytest.raises(NotInStrictSubset) as refused:
        to_strict_subset(schema)
    assert any(problem.startswith(says) for problem in refused.value.problems), refused.value.problems
    assert guided_json("response_format", schema)["response_format"]["json_schema"] == {
        "name": "output", "schema": schema, "strict": False}


@pytest.mark.parametrize("schema, says", [
    (closed(a={"type": "object", "patternProperties": {"^x": {"type": "string"}}, "additionalProperties": False}),
     "patternProperties is not a keyword"),
    (closed(a={"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "integer"}, "maxItems": 2}),
     "prefixItems is not a keyword"),
    (closed(a={"type": "array", "items": {"type": "integer"}, "uniqueItems": True}), "uniqueItems is not a keyword"),
    (closed(a={"type": "object", "required": ["b"]}), "required names b, which properties does not declare"),
    (closed(a={"type": "object"}), "an object that declares no properties"),
    (closed(a={"oneOf": [{"type": "integer"}, {"type": "number"}]}), "no const tells the branches of its oneOf apart"),
    ({"type": "object", "properties": {"a": {"type": ["integer", "null"], "default": 5}}},
     "optional, nullable, and 5 by default"),
], ids=["patternProperties", "prefixItems", "uniqueItems", "required-undeclared", "open-object", "overlapping-oneOf",
        "nullable-default"])
def test_a_rewrite_that_would_change_the_meaning_is_refused(schema, says):
    with pytest.raises(NotInStrictSubset, match=says):
        to_strict_subset(schema)


def test_an_optional_property_left_out_as_null_keeps_its_default():
    class Counter(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        start: int = 5
        label: str | None = None

    schema = Counter.model_json_schema()
    strict = Draft202012Validator(to_strict_subset(schema))
    for reply, means in [({"start": None, "label": None}, {"label": None}), ({"start": 3, "label": "x"}, None),
                         ({"start": None, "label": "x"}, {"label": "x"})]:
        strict.validate(reply)
        read = left_out_nulls(schema, reply)
        assert read == (reply if means is None else means)
        Draft202012Validator(schema).validate(read)
        assert Counter.model_validate(read).start == (5 if reply["start"] is None else reply["start"])


def test_the_union_a_null_is_read_in_is_the_branch_the_reply_matches():
    schema = to_strict_subset(STEP_SCHEMA)
    write = {"tool_name": "write", "content": "Red mug", "press_enter": None}
    click = {"tool_name": "click", "element": "Search products", "x": 500, "y": 120}
    for call, read in [(write, {"tool_name": "write", "content": "Red mug"}), (click, click)]:
        step = {"note": None, "thought": "Search.", "tool_call": call}
        Draft202012Validator(schema).validate(step)
        assert left_out_nulls(STEP_SCHEMA, step) == {"note": None, "thought": "Search.", "tool_call": read}


@cache
def recorded_agent_schemas() -> list[dict]:
    """Every schema the agent sends, in every configuration, over a scripted run of every task (recorded once per
    test session: about 20 s on 2 cores)."""
    sent = []

    class Recorder(ScriptedProposer):
        def propose(self, messages, app, schema=None):
            sent.append(copy.deepcopy(schema))
            return super().propose(messages, app, schema)

    for config in CONFIGS:
        for task in TASKS:
            run_episode(Recorder(ScriptedPolicy(task)), task, 0, config)
    return sent


def goal_schemas() -> list[dict]:
    instructions = [instruction(task, start_app(task, 0)) for task in TASKS]
    return [goal_schema(text, CATALOG) for text in [*instructions, "Sign in as ada.", "What is on sale today?"]]


def every_schema_the_workshop_builds() -> list[dict]:
    screens = [start_app(task, 0) for task in TASKS]
    return [ANSWER_JSON_SCHEMA, Answer.model_json_schema(), STEP_SCHEMA, HAND_WRITTEN_STEP_SCHEMA,
            probe_model("probe-abc123").model_json_schema(), *map(per_screen_schema, screens), *goal_schemas(),
            *recorded_agent_schemas()]


def test_every_schema_the_workshop_sends_goes_into_the_subset_and_none_allows_nothing():
    schemas = every_schema_the_workshop_builds()
    assert len(schemas) > 100
    for schema in schemas:
        assert empty_alternatives(schema) == [], json.dumps(schema)[:300]
        assert subset_problems(to_strict_subset(schema)) == []


def test_a_goal_for_an_instruction_naming_no_product_has_no_empty_enum():
    schema = goal_schema("What is on sale today?", CATALOG)
    assert empty_alternatives(schema) == [] and subset_problems(to_strict_subset(schema)) == []
    assert schema["properties"]["order"] == {"type": "null"}
    assert schema["properties"]["find"] == {"type": "array", "items": {"type": "null"}, "maxItems": 0}
    Draft202012Validator(schema).validate({"sign_in": False, "username": None, "password": None, "order": None,
                                           "find": []})


def test_the_rewritten_schemas_still_accept_every_step_the_scripted_policy_writes():
    for task in TASKS:
        app, policy = start_app(task, 0), ScriptedPolicy(task)
        strict = Draft202012Validator(to_strict_subset(per_screen_schema(app)))
        step = policy.next_step(app)
        assert strict.is_valid(json.loads(step.model_dump_json())), task.id


def test_an_open_map_of_keys_is_sent_as_it_is_without_strict():
    """Notebook 05's old contract takes item objects with any keys: no rewrite keeps that inside the subset, so the
    response_format dialect sends it unchanged with strict: false, and a schema that converts goes strict."""
    open_map = {"type": "object", "properties": {"items": {"type": "array", "maxItems": 2, "items": {
        "type": "object", "additionalProperties": {"type": "string", "maxLength": 10}}}}, "required": ["items"]}
    with pytest.raises(NotInStrictSubset, match="additionalProperties is not false"):
        to_strict_subset(open_map)
    spec = guided_json("response_format", open_map)["response_format"]["json_schema"]
    assert spec["strict"] is False and spec["schema"] == open_map
    closed = guided_json("response_format", STEP_SCHEMA)["response_format"]["json_schema"]
    assert closed["strict"] is True and subset_problems(closed["schema"]) == []


# --- every pattern built from text is one ECMA-262 reads, in Unicode mode (issue 47) ---------------------------

# What ECMA-262 lets a Unicode-mode pattern escape: its syntax characters and "/" (identity escapes), and the class
# and control escapes the workshop's patterns use. `re.escape` escapes more (" ", "-", "#", "&", "~"): refused there.
ESCAPE_UNICODE_MODE_REFUSES = re.compile(r"\\(?![\^$\\.*+?()\[\]{}|/dDsSwWbBnrtfv])")


def patterns(schema: dict) -> list[str]:
    return [node["pattern"] for _, node in subschemas(schema) if isinstance(node.get("pattern"), str)]


@cache
def patterns_built_from_text() -> list[str]:
    """Every pattern of every schema the workshop sends, of a grounded schema after every product page, and of a
    note of facts that hold every plain character but letters and digits."""
    app, grounding = after_every_product_page("receipt_then_price")
    schemas = [*every_schema_the_workshop_builds(), grounded_step_schema(app, grounding), notes(PUNCTUATION_FACTS)]
    return sorted({pattern for schema in schemas for pattern in patterns(schema)})


def test_every_pattern_escapes_only_what_ecma_262_lets_unicode_mode_escape():
    found = patterns_built_from_text()
    assert notes(PUNCTUATION_FACTS)["anyOf"][1]["pattern"] in found
    assert [p for p in found if ESCAPE_UNICODE_MODE_REFUSES.search(p)] == []


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: the conservative check above stands")
def test_every_pattern_compiles_in_ecma_262_unicode_mode_and_a_note_matches_its_facts():
    """`new RegExp(pattern, "u")`, as a JavaScript validator of JSON Schema compiles it, for every pattern; and the
    note pattern of the punctuation facts matches each of them, as Python's `re` does."""
    note = notes(PUNCTUATION_FACTS)["anyOf"][1]["pattern"]
    cases = [[pattern, PUNCTUATION_FACTS if pattern == note else []] for pattern in patterns_built_from_text()]
    script = ("const cases = JSON.parse(require('fs').readFileSync(0, 'utf8')); const bad = [];"
              "for (const [p, samples] of cases) { try { const r = new RegExp(p, 'u');"
              " for (const s of samples) { if (!r.test(s)) bad.push(p + ' does not match ' + s); } }"
              " catch (e) { bad.push(e.message); } } console.log(JSON.stringify(bad));")
    ran = subprocess.run(["node", "-e", script], input=json.dumps(cases), capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == []
    assert all(re.fullmatch(note, fact) for fact in PUNCTUATION_FACTS)
