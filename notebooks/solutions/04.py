# Worked solutions for notebook 04's exercises. Load them into a cell with `%load solutions/04.py`.
import json

from helpers.contract import ANSWER_JSON_SCHEMA, ANSWER_TOKENS
from helpers.ladder import Reply
from helpers.world.store import CampusStore


def step(tool_call):
    return json.dumps({"note": None, "thought": "One step.", "tool_call": tool_call})


# Your turn 1: the user approves the order the task asked for (2 x Pencil set), so put 2 in the Quantity box
# first. The button positions are the same on every product page.
page = CampusStore(0)
page.signed_in, page.page, page.subject = True, "product", "Pencil set"
QUANTITY_X, QUANTITY_Y = next(el for el in page.elements() if el.name == "Quantity").grid_center()
PLACE_X, PLACE_Y = next(el for el in page.elements() if el.name == "Place order").grid_center()
order_replies = [
    step({"tool_name": "click", "element": "Quantity", "x": QUANTITY_X, "y": QUANTITY_Y}),
    step({"tool_name": "write", "content": "2"}),
    step({"tool_name": "click", "element": "Place order", "x": PLACE_X, "y": PLACE_Y}),
]


# Your turn 2: the repair call, with the contract's schema enforced in the backend's own dialect.
def guided_repair_for(conn):
    def guided_repair(messages):
        reply = conn.client.chat.completions.create(
            model=conn.model, messages=messages, temperature=0, max_tokens=ANSWER_TOKENS,
            **conn.profile.guided(ANSWER_JSON_SCHEMA, name="answer"))
        return Reply(reply.choices[0].message.content or "", reply.usage.model_dump() if reply.usage else None)
    return guided_repair
