"""Worked solutions for notebook 03's exercises. In the notebook, `%load {ROOT}/notebooks/solutions/03.py` puts this
file into a cell; run it, then run the check cells again."""
import copy

from helpers.loop import app_handlers, trim_to_last_n_images


# Your turn 1: every tool of app_handlers, and ask_user puts the model's question to the user and hands back the reply
# unchanged: the model reads every word of it as the user's. dispatch calls each handler with keyword arguments, so
# the parameter is named as the tool's is: question.
def user_handlers(app, user):
    return {**app_handlers(app), "ask_user": lambda question: user.reply(question)}


# Your turn 2: trim_to_last_n_images, except that the oldest screenshot is never evicted.
def trim_keep_first(messages, n=3):
    trimmed = trim_to_last_n_images(messages, n)  # a new list: the caller's messages stay as they are
    for original, kept in zip(messages, trimmed):
        if isinstance(original["content"], list) and any(p.get("type") == "image_url" for p in original["content"]):
            kept["content"] = copy.deepcopy(original["content"])  # the first observation, restored
            break
    return trimmed
