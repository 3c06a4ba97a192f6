"""The eval set through the whole pipeline against the embedded server: ask, ladder, harness.

What must always hold is asserted: every delivered object keeps the answer contract, whatever the
model wrote. Accuracy is not asserted; a 135M model's accuracy is a measurement (notebook 04's
pass-rate table), not a property of the pipeline.
"""
import pytest

from helpers.assistant import load_evals
from helpers.contract import validate_answer
from helpers.ladder import model_repair
from helpers.pipeline import answer_question

EVALS = load_evals()


@pytest.fixture(scope="module")
def conn(server_url):
    from helpers.runtime.backends import connect

    return connect()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("question", EVALS, ids=[q["id"] for q in EVALS])
def test_the_pipeline_always_delivers_a_contract_valid_object(conn, question):
    outcome = answer_question(conn, question, model_repair(conn, max_tokens=160), max_tokens=160)
    assert validate_answer(outcome.data) == [], (outcome.raw, outcome.ladder.repair_raw)
    assert outcome.ladder.rung in ("valid", "repaired", "fallback")
    assert outcome.ladder.repair_attempted == bool(outcome.ladder.errors and outcome.raw.strip())
