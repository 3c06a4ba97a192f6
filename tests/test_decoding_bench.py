"""The benchmark's bookkeeping: its cases, validity, merging per-task stats, and the tables it prints."""
import json
import math

import pytest

from helpers.bench.decoding import (
    PENALTIES,
    SCHEMAS,
    ModeStats,
    cases,
    is_valid,
    load_unbounded_cases,
    median,
    merge,
    messages_for,
    report,
    uncached,
)

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_validity_means_parsed_and_schema_valid():
    assert is_valid('Here: {"a": 1}', SCHEMA)
    assert not is_valid('{"a": "1"}', SCHEMA)
    assert not is_valid("no object", SCHEMA)


def test_the_schema_goes_in_the_prompt_in_an_output_format_block():
    system = messages_for(SCHEMA, "task")[0]["content"]
    assert f"<output_format>\n```json\n{json.dumps(SCHEMA)}\n```\n</output_format>" in system


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_schema_has_four_tasks_whose_prompt_carries_the_schema(name):
    chosen = cases(name)
    assert len(chosen) == 4 and len({json.dumps(case.messages) for case in chosen}) == 4
    for case in chosen:
        assert json.dumps(case.schema, separators=(",", ":")) in case.messages[0]["content"] or \
            json.dumps(case.schema) in case.messages[0]["content"]


def test_per_screen_schemas_allow_clicks_only_on_what_each_screen_shows():
    sign_in, home = cases("per-screen")[:2]
    clicks = [json.dumps(case.schema["$defs"]["ClickArgs"]) for case in (sign_in, home)]
    assert '"Sign in"' in clicks[0] and '"Sign in"' not in clicks[1]
    assert sign_in.messages[-1]["content"].startswith("<observation>")  # text only: the model cannot see


def test_an_uncached_prompt_changes_only_the_first_line_of_the_first_message():
    messages = messages_for(SCHEMA, "task")
    fresh = uncached(messages, "run 1")
    assert fresh[0]["content"] == "[run 1]\n" + messages[0]["content"] and fresh[1:] == messages[1:]
    assert uncached(messages, "run 2") != fresh


def test_merge_adds_counts_and_concatenates_samples():
    total = ModeStats(per_token_ms=[1.0], valid=1, total=2, forced=3)
    merge(total, ModeStats(per_token_ms=[3.0], valid=2, total=2, forced=4))
    assert total.per_token_ms == [1.0, 3.0] and (total.valid, total.total, total.forced) == (3, 4, 7)


def test_median_of_nothing_is_nan_not_zero():
    assert math.isnan(median([])) and median([1.0, 3.0, 10.0]) == 3.0


def test_the_report_shows_ratio_forced_share_mask_and_prompt_speed_side_by_side():
    guided = ModeStats(per_token_ms=[9.0], ttft_ms=[5.0], compile_ms=[2.0], mask_p50=[80.0], mask_p99=[400.0],
                       whole_mask_p50=[150.0], prompt_tokens_per_s=[410.0], fast_forward_batches=[3], forced=30,
                       whole_masks=48, tokens=120,
                       valid=4, stopped=4, stopped_valid=4, total=4)
    plain = ModeStats(per_token_ms=[10.0], ttft_ms=[5.0], prompt_tokens_per_s=[390.0], tokens=100,
                      valid=1, stopped=2, stopped_valid=1, total=4)
    table = report(guided, plain, ready_s=0.5)
    assert "| 0.900x |" in table
    assert "30/120 (25%)" in table and "| 80 / 400 |" in table
    assert "| 48/120 (40%) |" in table and "| 150 |" in table
    assert "| 390 | 410 |" in table
    assert "1/4" in table and "4/4" in table and "1/2" in table and "0.50" in table


def test_the_unbounded_string_cases_leave_their_strings_unbounded_and_compile():
    from llguidance import LLTokenizer

    from helpers.runtime.dialects import Constraint
    from helpers.server.guidance import compile_matcher

    found = load_unbounded_cases()
    assert len(found) >= 20 and len({case["name"] for case in found}) == len(found)
    for case in found:
        strings = [spec for spec in case["schema"]["properties"].values() if spec.get("type") == "string"]
        assert strings and not any("maxLength" in spec for spec in strings), case["name"]
        assert case["schema"]["additionalProperties"] is False  # only the strings are left open
        compile_matcher(Constraint("json_schema", case["schema"], "response_format"), LLTokenizer("byte"))


def test_the_termination_check_compares_no_penalty_with_each_kind():
    assert PENALTIES["no penalty"] == {}
    assert {key for penalty in PENALTIES.values() for key in penalty} >= {"frequency_penalty", "presence_penalty",
                                                                        "extra_body"}
