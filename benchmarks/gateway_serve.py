"""An ASGI app under a chosen server, for `gateway.py`'s server comparison.

    python benchmarks/gateway_serve.py --server SERVER --port PORT [--app gateway|trivial]
                                       [--config FILE]

`SERVER` is one of `uvicorn-h11` (uvicorn, its pure-Python h11 parser, the asyncio loop:
what the `gateway` extra installs), `uvicorn-httptools` (httptools' C parser), `uvicorn-
uvloop` (httptools and uvloop, `uvicorn[standard]`), `hypercorn`, `hypercorn-uvloop`;
granian runs from its own command line with `app` of this module (`gateway.py` does that).
The app is stream-core's gateway with the TOML config at `--config` (or
`$GW_BENCH_CONFIG`), its access log on stderr as it would be in service, or `trivial`: the
least an ASGI app can do for the same requests (the answers of `gateway_vendor.py`,
written from memory, one `send` per SSE event), the server's own cost.
Listens on 127.0.0.1; stops on SIGTERM/SIGINT or when its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_vendor import completion, raise_open_files_limit, stream_events  # noqa: E402

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SERVERS = ["uvicorn-h11", "uvicorn-httptools", "uvicorn-uvloop", "hypercorn", "hypercorn-uvloop"]


class Trivial:
    """Answers `/n/N/.../chat/completions` as the vendor does, with no upstream."""

    def __init__(self) -> None:
        self.events: dict[int, list[bytes]] = {}
        self.bodies: dict[int, bytes] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        parts = scope["path"].strip("/").split("/")
        n = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 20
        if json.loads(body or b"{}").get("stream") is not True:
            raw = self.bodies.get(n)
            if raw is None:
                raw = self.bodies[n] = completion(n, "bench").split(b"\r\n\r\n", 1)[1]
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": raw})
            return
        events = self.events.get(n)
        if events is None:  # the SSE events without their HTTP chunk framing
            events = [e.split(b"\r\n", 1)[1][:-2] for e in stream_events(n, "bench")]
            self.events[n] = events
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for e in events:
            await send({"type": "http.response.body", "body": e, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def build(name: str, config: str | None) -> Any:
    if name == "trivial":
        return Trivial()
    from stream_core.gateway import create_app, load_config

    handler = logging.StreamHandler(sys.stderr)
    access = logging.getLogger("stream_core.gateway.access")
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False
    return create_app(load_config(config or os.environ["GW_BENCH_CONFIG"]))


def _app_from_env() -> Any:
    if "GW_BENCH_APP" in os.environ:
        return build(os.environ["GW_BENCH_APP"], os.environ.get("GW_BENCH_CONFIG"))
    return None


app = _app_from_env()
"""For servers started by import path (granian): the app `$GW_BENCH_APP` names."""


def serve(server: str, application: Any, port: int) -> None:
    if server.startswith("uvicorn"):
        import uvicorn

        http = "h11" if server == "uvicorn-h11" else "httptools"
        loop = "uvloop" if server == "uvicorn-uvloop" else "asyncio"
        uvicorn.run(
            application,
            host="127.0.0.1",
            port=port,
            http=http,
            loop=loop,
            access_log=False,
            log_level="warning",
            backlog=4096,
            timeout_keep_alive=60,
        )
        return
    from hypercorn.asyncio import serve as hyper  # type: ignore[import-not-found]
    from hypercorn.config import Config  # type: ignore[import-not-found]

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.backlog = 4096
    config.keep_alive_timeout = 60
    config.loglevel = "WARNING"
    if server == "hypercorn-uvloop":
        import uvloop  # type: ignore[import-not-found]

        uvloop.run(hyper(application, config))
    else:
        asyncio.run(hyper(application, config))


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=SERVERS, default="uvicorn-h11")
    parser.add_argument("--app", choices=["gateway", "trivial"], default="gateway")
    parser.add_argument("--config")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    raise_open_files_limit()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    serve(args.server, build(args.app, args.config), args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
