"""The maintainers' tools: what keeps the repository's published files true, which no notebook runs.

| module    | holds                                                                                  |
|-----------|----------------------------------------------------------------------------------------|
| `publish` | the Colab badges, the setup cell every notebook opens with, the README's links: `python -m helpers.maintainers.publish` |
| `arc`     | the picture of the arc, one slide: `python -m helpers.maintainers.arc` writes docs/arc.png |
| `lock`    | the locks a laptop installs, requirements.lock and requirements-test.lock: `python -m helpers.maintainers.lock` |
"""
