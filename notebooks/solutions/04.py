# Worked solutions for notebook 04's exercises. Load them into a cell with `%load solutions/04.py`.
import json

from helpers.contract import ANSWER_JSON_SCHEMA, ANSWER_TOKENS
from helpers.ladder import Reply


def step(tool_call):
    return json.dumps({"note": None, "thought": "One step.", "tool_call": tool_call})


# Your turn 1: the user approves only the order the task asked for (2 x Pencil set), and the Quantity box is empty,
# which orders 1: focus the box, type the 2 the instruction spells out, then place the order. The centres are the
# ones the printed screen gives (`center=[x, y]`).
order_replies = [
    step({"tool_name": "click", "element": "Quantity", "x": 400, "y": 455}),
    step({"tool_name": "write", "content": "2"}),
    step({"tool_name": "click", "element": "Place order", "x": 162, "y": 531}),
]


# Your turn 2: the repair call, with the contract's schema enforced in the backend's own dialect and room for a whole
# answer object.
def guided_repair_for(conn):
    def guided_repair(messages):
        return Reply.of(conn.client.chat.completions.create(
            model=conn.model, messages=messages, temperature=0, max_tokens=ANSWER_TOKENS,
            **conn.profile.guided(ANSWER_JSON_SCHEMA, name="answer")))
    return guided_repair
