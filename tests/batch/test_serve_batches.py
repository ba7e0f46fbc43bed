"""`stream-core serve` answers the batch endpoints too, for a harness in another process:
a recorded answer comes back through a batch as the message its stream gives."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx

from stream_core import Context, StreamOptions, UserMessage, complete, get_model
from stream_core.batch import BatchRequest, submit

RECORDING = (
    Path(__file__).parents[2]
    / "contract_tests/fixtures/anthropic-messages/llm-anthropic__test_prompt.0.body"
)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_answers_a_batch_as_its_stream(tmp_path: Path) -> None:
    port = _port()
    model = get_model("anthropic", "claude-haiku-4-5")
    proc = subprocess.Popen(
        [
            sys.executable, "-c", "import sys; from stream_core._cli import main; "
            "sys.exit(main(sys.argv[1:]))", "serve", "--port", str(port),
            "--scenario", f"{model.id}={RECORDING}", "--scenario", f"other={RECORDING}",
            "--batch-delay", "0.05",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(400):
            try:
                httpx.get(url + "/health", timeout=0.2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
        opts = StreamOptions(api_key="sk-test", base_url=url, max_tokens=200)
        ctx = Context(messages=[UserMessage(content="hi")])

        async def run() -> tuple[object, object]:
            job = await submit([BatchRequest("a", model, ctx, opts)], store=tmp_path, name="j")
            (result,) = await job.collect(interval=0.05, timeout=30)
            streamed = await complete(model.model_copy(update={"id": "other"}), ctx, opts)
            return result, streamed

        result, streamed = anyio.run(run)
        assert result.outcome == "succeeded"  # type: ignore[attr-defined]
        got = result.message  # type: ignore[attr-defined]
        assert got.content == streamed.content  # type: ignore[attr-defined]
        assert got.stop_reason == streamed.stop_reason  # type: ignore[attr-defined]
        assert got.usage.input == streamed.usage.input  # type: ignore[attr-defined]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
