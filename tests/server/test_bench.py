"""The benchmark's bookkeeping: validity, merging per-task stats, and the table it prints."""
import json
import math

from helpers.server.bench import ModeStats, is_valid, median, merge, messages_for, report

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_validity_means_parsed_and_schema_valid():
    assert is_valid('Here: {"a": 1}', SCHEMA)
    assert not is_valid('{"a": "1"}', SCHEMA)
    assert not is_valid("no object", SCHEMA)


def test_the_schema_goes_in_the_prompt_in_an_output_format_block():
    system = messages_for(SCHEMA, "task")[0]["content"]
    assert f"<output_format>\n```json\n{json.dumps(SCHEMA)}\n```\n</output_format>" in system


def test_merge_adds_counts_and_concatenates_samples():
    total = ModeStats(per_token_ms=[1.0], valid=1, total=2)
    merge(total, ModeStats(per_token_ms=[3.0], valid=2, total=2))
    assert total.per_token_ms == [1.0, 3.0] and (total.valid, total.total) == (3, 4)


def test_median_of_nothing_is_nan_not_zero():
    assert math.isnan(median([])) and median([1.0, 3.0, 10.0]) == 3.0


def test_the_report_shows_the_ratio_and_counts_side_by_side():
    guided = ModeStats(per_token_ms=[11.0], ttft_ms=[5.0], compile_ms=[2.0], mask_p50=[200.0], mask_p99=[400.0],
                       valid=4, stopped=4, stopped_valid=4, total=4)
    plain = ModeStats(per_token_ms=[10.0], ttft_ms=[5.0], valid=1, stopped=2, stopped_valid=1, total=4)
    table = report(guided, plain, ready_s=0.5, step_compile_ms=1.5)
    assert "| 1.100x |" in table
    assert "1/4" in table and "4/4" in table and "1/2" in table
    assert "0.50" in table and "1.50" in table
