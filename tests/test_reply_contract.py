"""What a server is asked to enforce, the client accepts: every schema the workshop sends, in every dialect.

For each schema the workshop sends and each dialect of `helpers.runtime.dialects.DIALECTS`, the schema the server is
asked to enforce is read back from the request as the embedded server reads it (`constraint_from_body`; for
`prompt_only`, the schema in the prompt). hypothesis-jsonschema draws replies from it, and each reply must pass every
check the client makes of a reply to that schema: the agent's turn checks and the `Step` model (notebooks 03 and 06),
the goal reading, the answer contract and its model, the probe's model, a notebook's own `jsonschema` check. The
dialects send one of two schemas, the schema itself or its strict rewrite (`response_format`), so each is drawn from
once. No model and no server.

The recorded tasks are all ASCII, so the last test also builds the per-screen, grounded and goal schemas from drawn
page notices, product names and instructions (any character, quotes, backslashes, line breaks, more than a field
holds): every reply such a schema lists outright, and one drawn from what each dialect sends, must pass.

Cost on 2 cores: about 40 s, nearly all of it hypothesis-jsonschema canonicalising a schema at each draw (the drawn
notices and instructions about 5 s of it), plus the recording of the agent's schemas, which
tests/test_strict_subset.py shares (about 20 s more when this file runs alone). So each of the few hundred schemas
of the agent's recorded turns gets one reply per schema sent; the others get a few dozen.
"""
from __future__ import annotations

import contextlib
import copy
import io
import itertools
import json
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from helpers import loop
from helpers.agent import CONFIGS, parse_goal, run_episode, turn_contract
from helpers.loop import ReplayPolicy, schema_problems
from helpers.contract import ANSWER_JSON_SCHEMA, validate_answer
from helpers.goal import Goal, goal_schema
from helpers.grounding import Grounding, grounded_step_schema
from helpers.runtime.dialects import DIALECTS, constraint_from_body, guided_json
from helpers.runtime.paths import ROOT
from helpers.runtime.probes import probe_model
from helpers.runtime.strict_subset import read_back
from helpers.pydantic_contract import Answer, answer_errors, model_errors
from helpers.screen_schema import per_screen_schema
from helpers.steps import HAND_WRITTEN_STEP_SCHEMA, STEP_SCHEMA, Step
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.store import CATALOG, CampusStore, Product
from helpers.world.tasks import Task, load_tasks, start_app
from test_strict_subset import goal_schemas, recorded_agent_schemas  # pytest puts tests/ on the path

Checks = Callable[[str], list[str]]  # a reply's raw text -> every problem the client finds in it


def step_checks(schema: dict) -> Checks:
    """A turn of notebook 03's loop (`Step`) and of notebook 06's agent: its schema check and its repair ladder's."""
    contract = turn_contract(schema)

    def problems(raw: str) -> list[str]:
        try:
            Step.model_validate_json(read_back(schema, raw))  # as notebook 03's loop reads a reply
        except ValidationError as exc:
            return [f"Step: {exc}"]
        return schema_problems(raw, schema) + contract.validate(contract.read(json.loads(raw)))  # as the ladder does

    return problems


def goal_checks(schema: dict) -> Checks:
    return lambda raw: [] if parse_goal(raw, schema) else ["no goal read", *model_errors(Goal, json.loads(raw))]


def answer_checks(schema: dict) -> Checks:
    return lambda raw: validate_answer(json.loads(raw)) + answer_errors(json.loads(raw))


def jsonschema_checks(schema: dict) -> Checks:
    """A notebook's own check of a guided reply: the schema, with `jsonschema`."""
    return lambda raw: [error.message for error in Draft202012Validator(schema).iter_errors(json.loads(raw))]


def probe_checks(schema: dict) -> Checks:
    model = probe_model("probe-abc123")

    def problems(raw: str) -> list[str]:
        try:
            model.model_validate_json(raw, strict=True)
        except ValidationError as exc:
            return [str(exc)]
        return []

    return problems


def notebook_schemas() -> list[dict]:
    """Notebook 00's (its city schema and the solution's verdict schema) and notebook 05's old answer contract, as
    their cells build them."""
    namespace: dict = {}
    exec((ROOT / "notebooks" / "solutions" / "00.py").read_text(encoding="utf-8"), namespace)
    cells = json.loads((ROOT / "notebooks" / "05_prompt_only_vs_guided.ipynb").read_text(encoding="utf-8"))["cells"]
    old = next("".join(cell["source"]) for cell in cells if "OLD_ANSWER_SCHEMA = " in "".join(cell["source"]))
    with contextlib.redirect_stdout(io.StringIO()):
        exec(old, namespace)
    return [namespace["city_schema"], namespace["verdict_schema"], namespace["OLD_ANSWER_SCHEMA"]]


# Each family: the schemas, the checks of a reply to one, and how many replies to draw for each schema it sends.
FAMILIES: dict[str, tuple[Callable[[], list[dict]], Callable[[dict], Checks], int]] = {
    "Step": (lambda: [STEP_SCHEMA, HAND_WRITTEN_STEP_SCHEMA], step_checks, 25),
    "agent turns": (recorded_agent_schemas, step_checks, 1),
    "goal": (goal_schemas, goal_checks, 8),
    "answer": (lambda: [ANSWER_JSON_SCHEMA, Answer.model_json_schema()], answer_checks, 20),
    "probe": (lambda: [probe_model("probe-abc123").model_json_schema()], probe_checks, 20),
    "notebooks": (notebook_schemas, jsonschema_checks, 10),
}
BATCH = 10  # sent schemas drawn from in one example: hypothesis bounds the choices one example may make


def sent_schemas(schema: dict) -> dict[str, tuple[dict, list[str]]]:
    """What each dialect asks the server to enforce, as the server reads it: each distinct schema with its dialects."""
    sent: dict[str, tuple[dict, list[str]]] = {}
    for dialect in DIALECTS:
        fields = guided_json(dialect, schema)
        body = {**fields.get("extra_body", {}), **{k: v for k, v in fields.items() if k != "extra_body"}}
        constraint = constraint_from_body(body)
        enforced = schema if constraint is None else constraint.value
        sent.setdefault(json.dumps(enforced, sort_keys=True), (enforced, []))[1].append(dialect)
    return sent


@pytest.mark.parametrize("family", FAMILIES)
def test_every_reply_a_server_may_write_passes_the_clients_checks(family):
    schemas, checks_for, examples = FAMILIES[family]
    # hypothesis-jsonschema resolves references in the schema it is given, in place: it gets a copy.
    cases = [(from_schema(copy.deepcopy(sent)), checks_for(schema), dialects)
             for schema in {json.dumps(s, sort_keys=True): s for s in schemas()}.values()
             for sent, dialects in sent_schemas(schema).values()]

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def replies_pass(data, batch):
        for replies, checks, dialects in batch:
            raw = json.dumps(data.draw(replies))
            assert checks(raw) == [], f"{family}, sent by {', '.join(dialects)}: {raw}"

    for start in range(0, len(cases), BATCH):
        replies_pass(batch=cases[start:start + BATCH])


def scripted_replies(task: Task, press_enter: bool | None) -> list[str]:
    """The scripted policy's run of a task as replay lines, each `write` that presses no Enter written with
    `press_enter` as given."""
    app, policy, replies = start_app(task, 0), ScriptedPolicy(task), []
    while not replies or json.loads(replies[-1])["tool_call"]["tool_name"] not in ("answer", "abort"):
        step = policy.next_step(app)
        data = step.model_dump()
        if data["tool_call"]["tool_name"] == "write" and not data["tool_call"]["press_enter"]:
            data["tool_call"]["press_enter"] = press_enter
        replies.append(json.dumps(data))
        loop.execute(step, app)
    return replies


def test_a_write_whose_press_enter_is_null_means_no_enter_in_every_loop():
    """The review's replay: `"press_enter": null`, as the strict rewrite lets a server write it, is a step that
    presses no Enter, in notebook 03's loop and in every configuration of notebook 06's."""
    task = next(task for task in load_tasks() if task.id == "sign_in")
    null, false = scripted_replies(task, None), scripted_replies(task, False)
    assert sum('"press_enter": null' in reply for reply in null) == 2

    def writes(turns) -> list:
        return [turn.step["tool_call"] for turn in turns if turn.step and turn.step["tool_call"]["tool_name"] == "write"]

    runs = {"notebook 03": [loop.run_trajectory(ReplayPolicy(replies), task, 0) for replies in (null, false)]}
    runs |= {config: [run_episode(ReplayPolicy(replies), task, 0, config) for replies in (null, false)]
             for config in CONFIGS}
    for name, (with_null, with_false) in runs.items():
        assert [turn.rung for turn in with_null.turns] == [turn.rung for turn in with_false.turns], name
        assert (with_null.outcome, with_null.success) == (with_false.outcome, with_false.success) == ("answered", True)
        assert writes(with_null.turns) == writes(with_false.turns)
        assert [call["press_enter"] for call in writes(with_null.turns)] == [False, False], name


# --- schemas built from page text and instructions nobody recorded (issue 47) -----------------------------------

# Text drawn with what breaks plain text: any character, and often a quote, a backslash, a line break, a curly
# apostrophe, an accent; up to 70 characters, past what most fields hold.
ODD = st.sampled_from(list('"\\\n\t\u2019\u00e9\u2028'))
TEXT = st.text(st.one_of(st.characters(codec="utf-8"), ODD), max_size=70)
WORD = st.text(st.one_of(st.characters(codec="utf-8", exclude_categories=["Z", "C"]), ODD), min_size=1, max_size=45)
NOTICES = st.one_of(st.just('Today\u2019s code: caf\u00e9 "42"'), st.builds("{}: {}".format, TEXT, TEXT), TEXT)
INSTRUCTIONS = st.one_of(
    st.builds("Sign in with username {} and password {}, then find the price of the Red mug. Answer '{}'.".format,
              WORD, st.one_of(st.just("caf\u00e9-lovelace59"), WORD), TEXT), TEXT)
PRODUCT_NAMES = st.one_of(st.just("Caf\u00e9 cr\u00e8me"), WORD)


def listed(spec: dict) -> list | None:
    """The values a property spec lists outright (a const, an enum, a boolean); None when it leaves text free."""
    if "const" in spec:
        return [spec["const"]]
    if "enum" in spec:
        return spec["enum"]
    return [False, True] if spec.get("type") == "boolean" else None


def listed_steps(variants: list[dict]) -> list[str]:
    """Every step whose tool call one of `variants` lists outright, each argument a value it lists."""
    steps = []
    for variant in variants:
        options = {name: listed(spec) for name, spec in variant["properties"].items()}
        if None not in options.values():
            steps += [json.dumps({"note": None, "thought": "t", "tool_call": dict(zip(options, values))})
                      for values in itertools.product(*options.values())]
    return steps


def odd_screens(notice: str, product: str) -> tuple[CampusStore, CampusStore]:
    """The results page listing `product` first, and its product page, each showing `notice`."""
    results = CampusStore(0)
    results.signed_in, results.page = True, "results"
    results.products = {product: Product(product, "$3.00", 4, "NF-1000"), **results.products}
    results.notices = {("results", ""): notice, ("product", product): notice}
    page = copy.deepcopy(results)
    page.page, page.subject = "product", product
    return results, page


@settings(max_examples=15, deadline=None, database=None, phases=[Phase.generate, Phase.shrink],
          suppress_health_check=list(HealthCheck))
@given(notice=NOTICES, text=INSTRUCTIONS, product=PRODUCT_NAMES, data=st.data())
def test_schemas_built_from_any_page_text_or_instruction_allow_only_what_the_client_accepts(notice, text, product,
                                                                                           data):
    """The per-screen, grounded and goal schemas built from drawn notices, product names and instructions: every
    reply they list outright (each click, answer, note of a fact seen, credential) and a reply drawn from what each
    dialect sends pass the client's checks."""
    results, page = odd_screens(notice, product)
    grounding = Grounding(text)
    for app in (results, page):
        grounding.observe(app)
    grounded, per_screen, goal = grounded_step_schema(page, grounding), per_screen_schema(results), \
        goal_schema(text, CATALOG)
    notes = [note for note in [notice, *grounding.facts]
             if Draft202012Validator(grounded["properties"]["note"]).is_valid(note)]
    credential = goal["properties"]["password"]
    spans = credential["anyOf"][1]["enum"] if "anyOf" in credential else []
    cases = [
        (grounded, step_checks(grounded), listed_steps(grounded["properties"]["tool_call"]["anyOf"]) + [
            json.dumps({"note": note, "thought": "t", "tool_call": {"tool_name": "abort", "reason": "x"}})
            for note in notes]),
        (per_screen, step_checks(per_screen), listed_steps(per_screen["$defs"]["ClickArgs"]["anyOf"])),
        (goal, goal_checks(goal), [json.dumps({"sign_in": True, "username": span, "password": span, "order": None,
                                               "find": []}) for span in spans]),
    ]
    for schema, checks, listed_replies in cases:
        for raw in listed_replies:
            assert checks(raw) == [], raw
        for sent, dialects in sent_schemas(schema).values():
            raw = json.dumps(data.draw(from_schema(copy.deepcopy(sent))))
            assert checks(raw) == [], f"sent by {', '.join(dialects)}: {raw}"
