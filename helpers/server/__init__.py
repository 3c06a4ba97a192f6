"""The embedded model's OpenAI-compatible server: infrastructure, not a lesson.

The notebooks talk to it exactly as they would talk to NVIDIA NIM or vLLM: over HTTP, through
the official `openai` client. Start it with `./workshop run helpers.server`, or from
Python with `helpers.runtime.embedded.ensure_server()` (what `helpers.runtime.backends.connect()` does).

| module         | holds                                                                       |
|----------------|-----------------------------------------------------------------------------|
| `app`          | the HTTP layer: routes, the key, limits, the busy answers (429), streaming  |
| `protocol`     | the request and response bodies as Pydantic models, and `RequestError`       |
| `engine`       | the model: prompt, decoding under the grammar's mask, cancellation          |
| `request_queue`| the bounded first-in, first-out line of requests waiting for the one model  |
| `peers`        | who holds a connection (its user, on loopback) and how many each may hold    |
| `guidance`     | a request's constraint as an llguidance grammar, or a 400 naming the problem |
| `sampling`     | temperature, top-p and the seeded draw                                      |
| `stop_strings` | cutting the reply at a stop string, also across tokens                      |

The facts the server and its clients share (the model id, the address, the server's name, the private folder
where a server writes its port and key) live in `helpers.runtime.embedded`, which the server imports and which
imports nothing of the server. Starting, finding and stopping a server is the client's side, and lives there too;
the benchmark of guided decoding on this server is `python -m helpers.bench.decoding`.
"""
