"""The gateway's fidelity matrix (issue 36, point 5): the official SDKs of three dialects
against the gateway, each upstream one of the eight wire APIs served on loopback by
`fake_vendor` from scripted turns, for every scenario of `SCENARIOS`.

A cell passes when what the SDK accumulates equals what stream-core reads from that
upstream's own bytes (`oracle`: text, thinking, tool calls with their arguments, citations,
usage with cache reads and writes, stop reason, in the dialect's own fields), and every
request the upstream got is one its vendor accepts (`matrix_vendors.problems`), with the
state that vendor needs back restored (`matrix_vendors.restored`). A cell whose script the
upstream cannot say (`vendor_bytes` refuses it, naming why) is skipped with that reason.

`run_cell(matrix, scenario, dialect, upstream)` runs one; `markdown(results)` prints the
table the docs show.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import uvicorn
from matrix_clients import CLIENTS, Failure, Reading
from matrix_scenarios import ERRORS, SCENARIOS, Plan, Skip, http_error
from matrix_vendors import UPSTREAMS, problems, restored

from stream_core import (
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    ToolCall,
    UserMessage,
    stream,
)
from stream_core.gateway import GatewayConfig, Upstream, create_app
from stream_core.testing import (
    ANY_MODEL,
    Synthesized,
    fake_vendor,
    replay_client,
    vendor_bytes,
)
from stream_core.testing._scenarios import frames

__all__ = ["SCENARIOS", "Matrix", "Skip", "markdown", "run_cell"]

GUARD = 10.0  # seconds: a guard against hangs, never a timing assertion
CLIENT_KEY = "client-key-not-for-vendors"
VENDOR_KEY = "matrix-vendor-key"
VENDOR_ENV = {
    "ANTHROPIC_API_KEY": VENDOR_KEY,
    "OPENAI_API_KEY": VENDOR_KEY,
    "MISTRAL_API_KEY": VENDOR_KEY,
    "GEMINI_API_KEY": VENDOR_KEY,
    "AWS_BEARER_TOKEN_BEDROCK": VENDOR_KEY,
    "AWS_REGION": "us-east-1",
}
"""The vendors' keys as the gateway reads them from its environment (fakes)."""


# --- the gateway and the upstreams ---------------------------------------------------------


class Matrix:
    """The gateway on loopback (uvicorn in a thread, one app per cell), an SDK client per
    dialect, and a folder for the cells' recordings."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.app: Any = None
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            self._asgi, interface="asgi3", http="h11", lifespan="off", log_level="warning",
            access_log=False,
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.clients = {api: cls(self.url, CLIENT_KEY) for api, cls in CLIENTS.items()}
        self.n = 0

    async def _asgi(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    def __enter__(self) -> Matrix:
        self.thread.start()
        deadline = time.monotonic() + GUARD
        while not self.server.started:
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        for client in self.clients.values():
            client.sdk.close()
        self.server.should_exit = True
        self.thread.join(GUARD)
        self.sock.close()

    def serve(self, config: GatewayConfig) -> None:
        self.app = create_app(config)

    def name(self) -> str:
        self.n += 1
        return f"matrix-model-{self.n}"


def upstream(spec: str, api_override: str | None, url: str) -> Upstream:
    """`spec` served at `url` (the catalog's base URL path kept: `/v1`, `/v1beta`)."""
    catalog = Upstream(spec, api=api_override).resolve()
    path = urlsplit(catalog.base_url).path.rstrip("/")
    return Upstream(spec, api=api_override, base_url=url + path)


def render(
    turn: Any, model: Model, folder: Path, encrypted: str | None
) -> tuple[Path, Synthesized]:
    """`turn` as `model`'s vendor streams it, written where `fake_vendor` plays it."""
    try:
        synth = vendor_bytes(turn, model.api, model=model.id)
    except ValueError as e:
        raise Skip(str(e).removeprefix("vendor_bytes: ")) from None
    if encrypted is not None:
        synth = Synthesized(_with_encrypted(synth.body, encrypted), synth.meta)
    folder.mkdir(parents=True, exist_ok=True)
    return synth.write(folder / f"turn{len(list(folder.glob('*.body')))}"), synth


def _with_encrypted(body: bytes, encrypted: str) -> bytes:
    """A Responses body whose reasoning items carry `encrypted_content` (what
    `include=["reasoning.encrypted_content"]` gets; `vendor_bytes` writes none)."""
    out = b""
    for frame in body.split(b"\n\n"):
        if not frame.strip():
            continue
        event, _, data = frame.partition(b"\ndata: ")
        payload = json.loads(data)
        items = [payload.get("item") or {}, *((payload.get("response") or {}).get("output") or ())]
        for item in items:
            if item.get("type") == "reasoning" and payload["type"] != "response.output_item.added":
                item["encrypted_content"] = encrypted
        out += event + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"
    return out


def oracle(model: Model, synth: Synthesized) -> AssistantMessage:
    """What stream-core reads from the upstream's bytes (no gateway between)."""

    async def main() -> AssistantMessage:
        options = StreamOptions(api_key=VENDOR_KEY, client=replay_client(synth), max_retries=0)
        async with stream(model, Context(messages=[UserMessage(content="hi")]), options) as s:
            return await s.result()

    return anyio.run(main)


# --- a cell ---------------------------------------------------------------------------------


def run_cell(m: Matrix, scenario: str, dialect: str, api: str) -> None:
    """Run one cell: returns when it passes, raises `Skip` or `AssertionError`."""
    plan = SCENARIOS[scenario](api)
    spec = UPSTREAMS[api]
    model_spec = plan.model or spec.model
    model = Upstream(model_spec, api=spec.api_override).resolve()
    folder = m.folder / f"cell{m.n + 1}"
    client = m.clients[dialect]
    if plan.kind == "fallover":
        _fallover(m, plan, dialect, api, folder)
        return
    if plan.kind == "cancel":
        _cancel(m, plan, dialect, api, model, folder)
        return
    rendered = [render(t, model, folder, plan.encrypted) for t in plan.turns]
    with fake_vendor(scenarios={ANY_MODEL: [p for p, _ in rendered]}) as fake:
        name = m.name()
        m.serve(GatewayConfig(models={name: upstream(model_spec, spec.api_override, fake.url)}))
        if plan.kind == "error":
            message = oracle(model, rendered[0][1])
            got = client.send(name, client.start(), plan.ask)
            _expect_failure(dialect, got, message, retry_after=None)
        else:
            oracles = [oracle(model, s) for _, s in rendered]
            for script, read in zip(plan.turns, oracles, strict=True):
                _faithful(script, read)
            _talk(m, plan, client, name, oracles)
        sent = list(fake.requests)
    _check_requests(api, sent, len(plan.turns), plan)


def _faithful(script: Any, read: AssistantMessage) -> None:
    """The oracle is the script as its vendor says it (what `vendor_bytes` promises):
    the same texts, thinking, calls and stop reason, so no cell passes on an empty read."""
    if not isinstance(script, AssistantMessage):
        return  # a FauxTurn (a web search, a text): its blocks are checked by the cell

    def said(m: AssistantMessage) -> list[Any]:
        out: list[Any] = []
        for b in m.content:
            if isinstance(b, ToolCall):
                out.append((b.name, None if b.truncated else b.arguments))
            elif b.type in ("text", "thinking"):
                out.append(getattr(b, b.type))
        return out

    assert said(read) == said(script), f"the upstream's bytes read back as {said(read)}"
    assert read.stop_reason == script.stop_reason, f"read back as {read.stop_reason}"


def _talk(m: Matrix, plan: Plan, client: Any, name: str, oracles: list[Any]) -> None:
    convo = client.history() if plan.history else client.start()
    for n, message in enumerate(oracles, 1):
        got = client.send(name, convo, plan.ask)
        where = f"turn {n}"
        if isinstance(got, Failure):
            raise AssertionError(
                f"{where}: the SDK got HTTP {got.status} ({got.type}): {got.message}"
            )
        expected = client.project(message)
        _same(where, expected, got.form)
        for view in got.also:
            _same(f"{where} (terminal response)", expected, view)
        if got.start is not None:
            _start_usage(where, client, message, got.start)
        if n < len(oracles):
            convo = client.follow(convo, got, plan.user)


def _start_usage(where: str, client: Any, message: AssistantMessage, got: Any) -> None:
    """An Anthropic `message_start` says the input and cache tokens known at the first
    content: the final ones where the upstream says them first (Anthropic), else none
    yet or the final ones (a body read in one piece), never other numbers."""
    final = client.start_usage(message.usage)
    zero = dict.fromkeys(final, 0)
    if message.api == "anthropic-messages" or got != zero:
        _same(f"{where} message_start usage", final, got)


def _same(where: str, expected: dict[str, Any], got: dict[str, Any]) -> None:
    wrong = [
        f"{key}: expected {expected.get(key)!r}, got {got.get(key)!r}"
        for key in sorted(set(expected) | set(got))
        if _norm(expected.get(key)) != _norm(got.get(key))
    ]
    if wrong:
        raise AssertionError(f"{where}: " + "; ".join(wrong))


def _norm(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _expect_failure(
    dialect: str, got: Reading | Failure, message: AssistantMessage, *, retry_after: bool | None
) -> None:
    assert message.error is not None, "the oracle read no error"
    kind = message.error.kind
    if not isinstance(got, Failure):
        raise AssertionError(f"expected an HTTP error ({kind}), the SDK got an answer: {got.form}")
    status, kind_type = ERRORS[dialect].get(kind, (None, None))
    assert status is not None, f"no expectation for kind {kind!r} in {dialect}"
    said = f"HTTP {got.status} {got.type} retry-after={got.retry_after}"
    assert got.status == status, f"{kind}: expected HTTP {status}, got {said}"
    if kind_type is not None:
        assert got.type == kind_type, f"{kind}: expected type {kind_type}, got {said}"
    # The dialect's error shape: a type (or code) and a message the SDK reads.
    assert got.type and got.message not in ("", "None"), f"no error type or message: {said}"
    if retry_after:
        assert got.retry_after is not None and float(got.retry_after) >= 1, (
            f"no retry-after: {said}"
        )


def _check_requests(api: str, sent: list[Any], turns: int, plan: Plan) -> None:
    assert len(sent) == turns, f"the upstream got {len(sent)} requests for {turns} turns"
    for n, r in enumerate(sent, 1):
        wrong = problems(api, r.body, r.headers, CLIENT_KEY)
        assert not wrong, f"request {n} to {api} would be refused: {wrong}"
    if plan.state and len(sent) > 1:
        wrong = restored(api, sent[-1].body, plan.state)
        assert not wrong, f"request {len(sent)} to {api}: {wrong}"
    if plan.kind == "structured":
        where = _schema_path(sent[0].body)
        assert where is not None, f"the schema never reached {api}"


def _schema_path(body: Any, path: str = "") -> str | None:
    """Where the request holds the scripted schema (outside the conversation)."""
    if isinstance(body, str):
        return path if "temperature_c" in body else None
    if isinstance(body, dict):
        if "temperature_c" in (body.get("properties") or {}):
            return path or "."
        for k, v in body.items():
            if k not in ("messages", "contents", "input", "system"):
                found = _schema_path(v, f"{path}.{k}")
                if found:
                    return found
    return None


def _fallover(m: Matrix, plan: Plan, dialect: str, api: str, folder: Path) -> None:
    """A route of two deployments: the first's 429 falls over to the second, whose answer
    is all the SDK sees; then both 429: the SDK gets a 429 with retry-after."""
    spec = UPSTREAMS[api]
    second = Upstream(spec.second, api=spec.api_override).resolve()
    first = Upstream(spec.model, api=spec.api_override).resolve()
    limited = http_error(api, "rate_limit", "slow down", 120)
    answer = render(plan.turns[0], second, folder / "second", None)
    client = m.clients[dialect]
    for exhausted in (False, True):
        busy = render(limited, first, folder / f"first{exhausted}", None)
        tail = render(limited, second, folder / "second429", None) if exhausted else answer
        with (
            fake_vendor(scenarios={ANY_MODEL: [busy[0]]}) as a,
            fake_vendor(scenarios={ANY_MODEL: [tail[0]]}) as b,
        ):
            name = m.name()
            route = [
                upstream(spec.model, spec.api_override, a.url),
                upstream(spec.second, spec.api_override, b.url),
            ]
            m.serve(GatewayConfig(models={name: f"route:{name}"}, routes={name: route}))
            got = client.send(name, client.start(), plan.ask)
            if exhausted:
                _expect_failure(dialect, got, oracle(second, tail[1]), retry_after=True)
            elif isinstance(got, Failure):
                raise AssertionError(f"the route did not fall over: HTTP {got.status} {got.type}")
            else:
                _same(
                    "the second deployment's answer",
                    client.project(oracle(second, answer[1])),
                    got.form,
                )
            sent = [*a.requests, *b.requests]
        assert [len(a.requests), len(b.requests)] == [1, 1], "each deployment is asked once"
        for r in sent:
            wrong = problems(api, r.body, r.headers, CLIENT_KEY)
            assert not wrong, f"a request to {api} would be refused: {wrong}"


def _cancel(m: Matrix, plan: Plan, dialect: str, api: str, model: Model, folder: Path) -> None:
    """The upstream streams without end; the SDK reads the first text and closes its
    stream: the gateway must close its upstream connection."""
    _, synth = render(plan.turns[0], model, folder, None)
    spec = UPSTREAMS[api]
    with Endless(synth) as vendor:
        name = m.name()
        m.serve(GatewayConfig(models={name: upstream(spec.model, spec.api_override, vendor.url)}))
        first = m.clients[dialect].first_text(name, m.clients[dialect].start(), plan.ask)
        assert first.startswith("tick"), f"the first text was {first!r}"
        assert vendor.closed.wait(GUARD), "the upstream connection stayed open after the SDK closed"
        sent = list(vendor.requests)
    for r in sent:
        wrong = problems(api, r["body"], r["headers"], CLIENT_KEY)
        assert not wrong, f"the request to {api} would be refused: {wrong}"


class Endless(ThreadingHTTPServer):
    """A vendor that streams `synth` up to its first text and then repeats that text
    event until the client goes away (`closed` is set then) or `GUARD` x 3 passes."""

    daemon_threads = True

    def __init__(self, synth: Synthesized) -> None:
        media = str(synth.meta["headers"]["content-type"])
        pieces = list(_frames(synth.body, media))
        at = next(i for i, p in enumerate(pieces) if b"tick" in p)
        self.head, self.tick, self.media = pieces[: at + 1], pieces[at], media
        self.closed = threading.Event()
        self.requests: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _EndlessHandler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> Endless:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self._thread.join(GUARD)
        self.server_close()


class _EndlessHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Endless

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append({"body": json.loads(raw or b"null"), "headers": headers})
        self.send_response(200)
        self.send_header("content-type", self.server.media)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        end = time.monotonic() + 3 * GUARD
        try:
            for piece in self.server.head:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            while time.monotonic() < end:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(self.server.tick), self.server.tick))
                self.wfile.flush()
                time.sleep(0.02)
        except OSError:
            self.server.closed.set()


def _frames(body: bytes, media: str) -> Iterator[bytes]:
    """A body cut where the vendor wrote one event (AWS event-stream frames too)."""
    if "amazon.eventstream" not in media:
        yield from frames(body, media)
        return
    at = 0
    while at < len(body):
        (total,) = struct.unpack(">I", body[at : at + 4])
        yield body[at : at + total]
        at += total


# --- the table ------------------------------------------------------------------------------


def markdown(results: dict[tuple[str, str, str], tuple[str, str]]) -> str:
    """The matrix as markdown: one table per dialect (rows: scenarios, columns: upstream
    APIs), pass / skip / FAIL per cell, the skip reasons and failures as notes."""
    short = {"anthropic-messages": "Anthropic Messages", "openai-responses": "OpenAI Responses",
             "openai-completions": "Chat Completions"}  # fmt: skip
    counts = {k: sum(1 for v in results.values() if v[0] == k) for k in ("pass", "skip", "FAIL")}
    lines = [
        "# The gateway's fidelity matrix",
        "",
        "The official `anthropic` and `openai` SDKs against the gateway, each upstream a loopback "
        "vendor of one wire API (`tests/gateway/test_matrix.py`). "
        f"{counts['pass']} pass, {counts['skip']} skip (the upstream cannot say the script), "
        f"{counts['FAIL']} fail, of {len(results)} cells run.",
    ]
    models = ", ".join(f"{api} `{spec.model}`" for api, spec in UPSTREAMS.items())
    lines += [
        "",
        "A cell passes when the SDK accumulates exactly what stream-core reads from the "
        "upstream's own bytes (text, thinking, tool calls with their arguments, citations, "
        "usage with cache reads and writes, the stop reason, in the dialect's own fields) and "
        "every request the upstream got is one its vendor accepts (calls paired with results, "
        "Mistral's nine-character ids, signatures and encrypted reasoning sent back, no gateway "
        f"carrier and no client key upstream). Upstreams: {models}.",
    ]
    notes: dict[str, int] = {}
    for dialect in CLIENTS:
        lines += ["", f"## {short[dialect]} clients", ""]
        lines.append("| scenario | " + " | ".join(UPSTREAMS) + " |")
        lines.append("|---" * (len(UPSTREAMS) + 1) + "|")
        for scenario in SCENARIOS:
            row = []
            for api in UPSTREAMS:
                status, note = results.get((scenario, dialect, api), ("—", ""))
                if note and status != "pass":
                    n = notes.setdefault(note, len(notes) + 1)
                    status = f"{status} [{n}]"
                row.append(status)
            lines.append(f"| {scenario} | " + " | ".join(row) + " |")
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"{n}. {note}" for note, n in notes.items()]
    return "\n".join(lines) + "\n"
