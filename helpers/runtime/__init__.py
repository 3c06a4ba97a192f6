"""The machinery every notebook relies on and none teaches.

| module        | holds                                                                                   |
|---------------|-----------------------------------------------------------------------------------------|
| `backends`    | the one place that chooses the model (embedded, NVIDIA, H Company, any OpenAI-compatible) and its dialect |
| `profiles`    | what each backend is (address, model, dialect, whether its model sees images), and a `Connection` to one |
| `settings`    | reading a setting: the environment, then the checkout's `.env`, then Colab's secrets; the errors that name one |
| `client`      | the official `openai` client configured for a backend, its errors for refused guided requests explained |
| `probes`      | the dialect probe and the image probe: what a server enforces, and whether its model sees images |
| `quoting`     | a server's error quoted in a message: on one line, cut short, the key blanked            |
| `dialects`    | how each server spells guided JSON, and nothing else                                    |
| `concealer`   | the passwords known to be secret, and the one concealer every record, repr and view uses |
| `replies`     | what a model call returned (text, usage, timings), read one way everywhere, and usages summed |
| `embedded`    | the embedded server's facts (model id, address), and starting, finding, stopping it     |
| `strict_subset` | OpenAI's strict subset of JSON Schema: the checker, the rewrite into it, and reading a reply back |
| `schema_tree` | a JSON Schema as a tree: the one walk over its nodes, and the one `$ref` resolver       |
| `environment` | the setup cell's `prepare()` and the pre-class check `python -m helpers.runtime.environment --check` |
| `install`     | installing the embedded model's packages with progress                                  |
| `hints`       | a kernel that says which cell a missing name comes from (the Setup cell's `conn`)        |
| `paths`       | where the workshop's files are                                                          |
| `interpreter` | which Python runs the workshop's modules, said in one line when it is the wrong one       |
| `progress`    | progress as plain lines of text, readable on GitHub                                      |
| `versions`    | which software produced a benchmark's numbers                                           |
"""
