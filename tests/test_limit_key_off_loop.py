"""The limit key's slow hash of a credential (scrypt, so a short key is not recovered
from a store) is worked out once per credential, and never on the event loop: a gateway
meeting a new key does not hold every other call for tens of milliseconds."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from stream_core import Context, Model, StreamOptions, UserMessage, complete
from stream_core.testing import FakeVendor, fake_vendor, faux_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def vendor() -> Iterator[FakeVendor]:
    with fake_vendor(scenarios={"m-1": [faux_text("hi")] * 4}) as server:
        yield server


async def test_a_new_credential_is_hashed_off_the_event_loop(
    vendor: FakeVendor, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    real = hashlib.scrypt

    def scrypt(*args: Any, **kwargs: Any) -> bytes:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(hashlib, "scrypt", scrypt)
    model = Model(
        id="m-1", api="openai-completions", provider="openai", base_url=vendor.url + "/v1"
    )
    context = Context(messages=[UserMessage(content="hello")])
    key = f"sk-off-loop-{id(threads)}"  # a credential this process has not hashed yet
    loop_thread = threading.get_ident()
    for _ in range(3):
        message = await complete(model, context, StreamOptions(api_key=key))
        assert message.error is None
    assert len(threads) == 1  # once per credential
    assert threads[0] != loop_thread
