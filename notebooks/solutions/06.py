"""Worked solutions for notebook 06. Load one into a cell with `%load solutions/06.py`, or read it here."""
from helpers.grounding import screen_values


# Your turn 2: only the prices this screen shows can be the answer.
def price_answers(app):
    prices = [value for value in screen_values(app) if value.startswith("$")]
    if not prices:
        return []
    return [{"type": "object", "additionalProperties": False, "required": ["tool_name", "content"],
             "properties": {"tool_name": {"const": "answer"}, "content": {"enum": prices}}}]


# Your turn 1: a user who approves one order of 1 x Blue mug, once, and nothing else.
class CarefulUser:
    def __init__(self):
        self.approved = False

    def approve(self, effect):
        if effect.key == ("place_order", "Blue mug", 1) and not self.approved:
            self.approved = True
            return True
        return False

    def reply(self, question):
        return "I only want one Blue mug."
