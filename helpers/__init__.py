"""Structured outputs for LLM agents: the code the workshop notebooks build, importable.

The lesson modules stand here in notebook order; each imports only from its own notebook's modules and
earlier ones (a test walks the imports). Everything that is not a lesson lives in a subpackage: the floors
below the lessons (`world`, `runtime`, `server`, `widgets`), which import no lesson but the data contracts, and
above them the exercises' checks and the benchmarks, which measure the lessons, and the maintainers' tools,
which keep the published files true: no lesson imports them.

| notebook | module         | what it holds                                                              |
|----------|----------------|----------------------------------------------------------------------------|
| 01       | `contract`     | the final-answer contract, parsed and checked in plain Python              |
| 01       | `assistant`    | the campus assistant: its knowledge base, prompt and eval questions        |
| 01       | `bounds`       | the longest reply a schema allows, in bytes                                |
| 02       | `pydantic_contract` | the final-answer contract in Pydantic, and its errors in the validator's words |
| 02       | `steps`        | the Holo3 `Step` union: a flat tool call per step, every tool a model      |
| 03       | `loop`         | the Holo3 JSON agent loop, one schema-constrained step per turn            |
| 03       | `screen_schema` | a step schema built from the screen: one closed click per element on it    |
| 04       | `ladder`       | parse -> validate -> repair once -> deterministic fallback                 |
| 04       | `instruction`  | what the user's instruction spells out (what may be typed, and where)      |
| 04       | `harness`      | the model proposes, the harness disposes: intents checked before any effect |
| 04       | `pipeline`     | the campus assistant end to end: ask, ladder, harness                      |
| 05       | `compare`      | prompt-only against guided decoding in every dialect: `python -m helpers.compare` |
| 05       | `mask_view`    | per token, what the grammar allowed                                        |
| 06       | `goal`         | the user's goal: read by the model, confirmed by the user                  |
| 06       | `grounding`    | schemas built from the context each turn: constraints, and a hand-written tier |
| 06       | `replay`       | fixed reply scripts, labelled as such, to try the harness with             |
| 06       | `agent`        | the Holo3 loop governed by the harness                                     |

| subpackage  | what it holds                                                                          |
|-------------|----------------------------------------------------------------------------------------|
| `world`     | the simulated store, its tasks, side effects, the simulated user, the scripted policy  |
| `runtime`   | choosing a backend and its dialect, the embedded server's facts and process, installing, the notebooks' setup, paths |
| `server`    | the embedded model's OpenAI-compatible HTTP server                                     |
| `exercises` | the checks behind each notebook's exercises                                            |
| `bench`     | the benchmarks, run from the command line: the agent's configurations, guided decoding's cost, which model to embed |
| `maintainers` | the maintainers' tools, which no notebook runs: the Colab badges and setup cells, the picture of the arc |
| `widgets`   | sliders over an agent run's steps and a guided reply's tokens, each with a static rendering |
"""
import sys

if sys.argv[:1] == ["-m"]:  # `python -m helpers...`: with the wrong Python, say which one to use in one line
    from helpers.runtime.interpreter import explain_missing_packages

    explain_missing_packages()
