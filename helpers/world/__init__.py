"""The simulated world the agent notebooks (03, 04, 06) act in: not a lesson, the stage for one.

| module            | holds                                                                              |
|-------------------|------------------------------------------------------------------------------------|
| `store`           | the Northfield Campus Store: pages drawn with Pillow, an accessibility tree, clicks  |
| `effects`         | what an action would change, as the app says, and the ledger that keeps each once  |
| `tasks`           | the tasks in data/tasks.json: start the app, check the outcome, what each task wants |
| `users`           | the simulated user (labelled as one) and a real person at the keyboard             |
| `scripted_policy` | hand-written rules, no model: the reference path through every task                 |
| `obedient_policy` | the reference path plus obedience to every instruction a page shows: an adversary  |
"""
