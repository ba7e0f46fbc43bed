"""What the fake vendor answers with: scenarios (recordings and scripted turns in turn),
recordings picked by model name, each vendor's error shapes, and a body's event frames."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._types import AssistantMessage, ErrorKind
from ._codec import http_error
from ._faux import FauxTurn, faux_text

OURS = "(the fake vendor's own error)"

ANY_MODEL = "*"
"""The scenario key answering every model that no other scenario or recording names."""

ScenarioSource = str | Path | Sequence[str | Path | bytes | FauxTurn | AssistantMessage]
"""A scenario: a folder of `.body` files (in file-name order, numbers compared as
numbers), a text file listing recordings (one path a line, relative to the file; blank
lines and `#` comments skipped), one `.body` file, or a list of recordings and scripted
turns (a `FauxTurn` such as `faux_text("Hi")`, an `AssistantMessage`, or a string: the
text of the answer, as in `faux_model`, unless it ends in `.body` or names a file, then
a recording; turns are written in the wire format of the API the request came through,
`vendor_bytes`)."""

ScenarioItem = Path | bytes | FauxTurn | AssistantMessage
"""One answer of a scenario: a recording's path or bytes, or a scripted turn."""

# Path ending -> (the APIs it may be, in preference order; the vendor's 404 body shape).
# An API not listed here is still served: the model name alone then picks the recording.
ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("/messages", ("anthropic-messages",), "anthropic"),
    ("/chat/completions", ("openai-completions", "mistral-conversations"), "openai"),
    ("/conversations", ("mistral-conversations",), "openai"),
    ("/responses", ("openai-responses", "azure-openai-responses"), "openai"),
    (":streamGenerateContent", ("google-generative-ai", "google-vertex"), "google"),
    (":generateContent", ("google-generative-ai", "google-vertex"), "google"),
    ("/converse-stream", ("bedrock-converse-stream",), "bedrock"),
    ("/api/chat", ("ollama-chat",), "ollama"),
    ("/api/generate", ("ollama-generate",), "ollama"),
)

MODEL_IN_PATH = re.compile(r"/models?/([^/]+?)(?::[A-Za-z]\w*)?(?=/|$)")
"""The model a path names: Gemini's `/models/<id>:streamGenerateContent` (the `:method`
left out), Bedrock's `/model/<id>/converse-stream`, whose id may hold a `:`
(`amazon.nova-2-lite-v1:0`)."""


SHAPE_APIS: dict[str, str] = {
    "anthropic": "anthropic-messages",
    "openai": "openai-completions",
    "google": "google-generative-ai",
    "bedrock": "bedrock-converse-stream",
    "ollama": "ollama-chat",
}
"""Each error shape of `ROUTES` and the API whose error bodies it answers with."""


def error_body(shape: str, kind: ErrorKind, text: str) -> tuple[int, dict[str, Any]]:
    """An HTTP error of `kind` as the vendor of `shape` answers it (`_codec.http_error`:
    the dialect codec's `error_body`, or the provider's own words)."""
    return http_error(SHAPE_APIS[shape], kind, text)


def not_found_body(shape: str, model: str) -> dict[str, Any]:
    """A 404 body: no recording or scenario answers `model`."""
    text = f"model {model!r} not found (no recording or scenario of that name)"
    return error_body(shape, "not_found", text)[1]


def exhausted_body(shape: str, text: str) -> dict[str, Any]:
    """A 400 invalid-request body in the vendor's shape (not retried by clients)."""
    return error_body(shape, "invalid_request", text)[1]


def server_error_body(shape: str, text: str) -> dict[str, Any]:
    """A 500 body in the vendor's shape: the fake vendor could not answer."""
    return error_body(shape, "server", text)[1]


def shape_of(path: str) -> str:
    """The vendor whose error bodies a request path gets (OpenAI's when none matches)."""
    return next((vendor for suffix, _, vendor in ROUTES if path.endswith(suffix)), "openai")


def _natural(path: Path) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name)]


def load_scenario(source: ScenarioSource) -> list[ScenarioItem]:
    """The recordings of a scenario, in the order they answer."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            bodies = sorted(path.glob("*.body"), key=_natural)
            found: list[ScenarioItem] = list(bodies)
            if not found:
                raise ValueError(f"scenario {path}: no .body recordings in the folder")
            return found
        if not path.is_file():
            raise ValueError(f"scenario {path}: no such folder or file")
        if path.suffix == ".body":
            return [path]
        listed: list[ScenarioItem] = []
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            entry = line.strip()
            if not entry or entry.startswith("#"):
                continue
            item = path.parent / entry
            if not item.is_file() and not item.with_suffix(".body").is_file():
                raise ValueError(f"scenario {path}, line {n}: no such recording: {entry}")
            listed.append(item if item.suffix == ".body" else item.with_suffix(".body"))
        if not listed:
            raise ValueError(f"scenario {path}: lists no recordings")
        return listed
    items = list(source)
    if not items:
        raise ValueError("a scenario needs at least one recording")
    return [_item(item) for item in items]


def _item(item: str | Path | bytes | FauxTurn | AssistantMessage) -> ScenarioItem:
    """One entry of a scenario list: a recording (a `Path`, or a string naming a `.body`
    or an existing file), else a string is a text answer, as in `faux_model`."""
    if isinstance(item, (bytes, FauxTurn, AssistantMessage)):
        return item
    if isinstance(item, str) and not names_a_recording(item):
        return faux_text(item)
    path = Path(item)
    if not _is_file(path) and path.suffix != ".body" and _is_file(path.with_suffix(".body")):
        path = path.with_suffix(".body")
    if not _is_file(path):
        raise ValueError(f"scenario: no such recording: {path}")
    return path


def names_a_recording(text: str) -> bool:
    """Whether a scenario's string entry is a recording's path (it ends in `.body` or
    names a file) rather than the text of a scripted answer."""
    return text.endswith(".body") or _is_file(Path(text))


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a long text, a NUL: not a file name
        return False


@dataclass(frozen=True)
class Recording:
    api: str
    name: str
    path: Path

    def load(self) -> tuple[bytes, dict[str, Any]]:
        meta_path = self.path.with_suffix(".json")
        meta = json.loads(meta_path.read_text("utf-8")) if meta_path.is_file() else {}
        return self.path.read_bytes(), meta


def index_recordings(root: Path) -> dict[str, dict[str, Recording]]:
    """api -> recording name -> recording, for every `.body` under `root`."""
    out: dict[str, dict[str, Recording]] = {}
    for body in sorted(root.rglob("*.body")):
        meta_path = body.with_suffix(".json")
        api = body.parent.name if body.parent != root else ""
        if meta_path.is_file():
            try:
                api = str(json.loads(meta_path.read_text("utf-8")).get("api") or api)
            except ValueError:
                pass
        out.setdefault(api, {})[body.stem] = Recording(api, body.stem, body)
    return out


def frames(body: bytes, media_type: str) -> list[bytes]:
    """The body cut where the vendor wrote one event: SSE events, NDJSON lines."""
    if "event-stream" in media_type:
        parts = re.split(rb"(?<=\r\n\r\n)|(?<=\n\n)|(?<=\r\r)", body)
    elif "ndjson" in media_type or "jsonl" in media_type:
        parts = body.splitlines(keepends=True)
    else:
        return [body]
    return [p for p in parts if p]


def media_type(body: bytes, meta: dict[str, Any]) -> str:
    for key, value in (meta.get("headers") or {}).items():
        if key.lower() == "content-type":
            return str(value)
    head = body.lstrip()[:1]
    return "application/x-ndjson" if head == b"{" else "text/event-stream"
