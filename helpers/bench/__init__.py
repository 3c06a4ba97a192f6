"""The benchmarks: each measures what the lessons build, from the command line, and no lesson imports one.

| module         | holds                                                                                        |
|----------------|----------------------------------------------------------------------------------------------|
| `agent`        | notebook 06's configurations side by side on the store's tasks: `python -m helpers.bench.agent` |
| `decoding`     | what guided decoding costs the embedded server, token by token: `python -m helpers.bench.decoding` |
| `model_choice` | which model to embed: its goal readings and decode speed: `python -m helpers.bench.model_choice` |

Their results, each with the command that made it, are in docs/results.md; notebook 06 reads the agent bench's
saved records with `helpers.bench.agent`'s table printers.
"""
