"""helpers.replay: the stage notebook 06 sets by hand, and the replies a replay script is made of."""
from __future__ import annotations

import json

from helpers.harness import governed_turn
from helpers.replay import click_call, on_product_page, reply_line
from helpers.world.tasks import load_tasks

TASKS = {task.id: task for task in load_tasks()}


def test_the_stage_stands_on_the_products_page_with_the_tasks_goal():
    app, ctx, user = on_product_page(TASKS["order"], "Pencil set")
    assert (app.page, app.subject) == ("product", "Pencil set")
    assert ctx.asked_for.describe().startswith("order 2 x Pencil set")
    assert ctx.user is user and ctx.ledger.records() == []


def test_an_order_the_goal_asks_for_goes_to_the_user_and_runs_once():
    app, ctx, user = on_product_page(TASKS["order"], "Pencil set")
    for call in (click_call(app, "Quantity"), {"tool_name": "write", "content": "2"}, click_call(app, "Place order")):
        governed_turn(json.loads(reply_line(call)), app, ctx, user)
    assert [(order.product, order.quantity) for order in app.orders] == [("Pencil set", 2)]
    assert user.questions == ["approve? place an order: 2 x Pencil set, $23.90"]


def test_an_order_outside_the_goal_is_refused_without_asking():
    app, ctx, user = on_product_page(TASKS["price"], "Pencil set")
    _, decision, _ = governed_turn(json.loads(reply_line(click_call(app, "Place order"))), app, ctx, user)
    assert (decision.allowed, decision.cause) == (False, "not_asked")
    assert app.orders == [] and user.questions == []
