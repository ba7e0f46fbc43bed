"""An in-memory vendor batch API for the engine's own tests: no HTTP, a dict of
batches, answers written with the Anthropic codec's whole-answer writer. `crash_at`
names a step at which the next call raises `Crash` (a kill, as far as the journal knows)."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from stream_core import AssistantMessage, TextContent, Usage
from stream_core.provider import (
    BatchCounts,
    BatchPart,
    BatchSession,
    BatchStatus,
    BatchWire,
    RawResult,
    WireRequest,
    dialect,
)


class Crash(BaseException):
    """A kill -9 at a step (BaseException: nothing catches it on the way out)."""


@dataclass
class Vendor:
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    created: int = 0
    crash_at: str | None = None
    ended: bool = True
    expire: set[str] = field(default_factory=set)
    ids: Any = field(default_factory=lambda: itertools.count(1))

    def step(self, name: str) -> None:
        if self.crash_at == name:
            self.crash_at = None
            raise Crash(name)

    def codec(self) -> BatchWire:
        v = self

        def line(custom_id: str, request: WireRequest, model: Any) -> dict[str, Any]:
            payload = {k: x for k, x in request.payload.items() if k != "stream"}
            return {"custom_id": custom_id, "params": payload}

        async def submit(s: BatchSession, part: BatchPart) -> str:
            v.step("upload")
            fid = f"file{next(v.ids)}"
            v.files[fid] = b"x"
            s.record(file_id=fid)
            v.step("create")
            bid = f"batch{next(v.ids)}"
            v.batches[bid] = {
                "tag": part.tag,
                "lines": part.lines,
                "at": time.time(),
                "cancelled": False,
            }
            v.created += 1
            v.step("after_create")
            return bid

        async def status(s: BatchSession, bid: str) -> BatchStatus:
            b = v.batches[bid]
            state = "ended" if v.ended or b["cancelled"] else "running"
            return BatchStatus(bid, state, state, BatchCounts(total=len(b["lines"])), tag=b["tag"])

        async def results(s: BatchSession, st: BatchStatus) -> AsyncIterator[RawResult]:
            b = v.batches[st.id]
            encode = dialect("anthropic-messages").message_body
            for n, ln in enumerate(b["lines"]):
                v.step(f"result{n}")
                cid = ln["custom_id"]
                if b["cancelled"]:
                    yield RawResult(cid, "cancelled")
                elif cid in v.expire:
                    yield RawResult(cid, "expired")
                else:
                    msg = AssistantMessage(
                        api="anthropic-messages", provider="anthropic", model="m",
                        content=[TextContent(text=f"answer {cid}")],
                        usage=Usage(input=100, output=20), stop_reason="stop",
                    )  # fmt: skip
                    yield RawResult(cid, "succeeded", body=encode(msg, "m", None))

        async def cancel(s: BatchSession, bid: str) -> None:
            v.batches[bid]["cancelled"] = True

        async def listing(s: BatchSession) -> AsyncIterator[BatchStatus]:
            for bid in list(v.batches):
                yield await status(s, bid)

        async def find(s: BatchSession, part: BatchPart, since: float) -> list[str]:
            return [bid for bid, b in v.batches.items() if b["tag"] == part.tag]

        async def cleanup(s: BatchSession, st: BatchStatus | None) -> None:
            v.files.pop(str(s.recorded.get("file_id")), None)

        return BatchWire(
            name="memory", line=line, submit=submit, status=status, results=results,
            cancel=cancel, listing=listing, find=find, cleanup=cleanup, one_model=False,
        )  # fmt: skip


def install(monkeypatch: Any, vendor: Vendor) -> None:
    """Serve Anthropic models' batches from `vendor`."""
    import stream_core._batch_wire as bw

    codec = vendor.codec()
    monkeypatch.setattr(bw, "batch_wire", lambda model: codec)
    import stream_core.batch._job as job
    import stream_core.batch._plans as plans
    import stream_core.batch._submit as submit

    for module in (job, plans, submit):
        monkeypatch.setattr(module, "batch_wire", lambda model: codec)
    _ = replace
