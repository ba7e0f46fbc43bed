"""Testing code that uses stream-core, and providers written for it, without the network.

- `faux_model(turns)`: a scripted model (api `faux`) answering through the real pipeline;
  `faux_web_search`, `faux_server_tool` and `faux_content` script what a vendor runs and
  makes itself (server tool calls and results, citations, files).
- `replay_client(recording)` / `replay_sequence(recordings)`: an `httpx.AsyncClient`
  serving recorded vendor bodies, for `StreamOptions(client=...)`.
- `vendor_bytes(turn, api)`: a scripted turn as the bytes `api` would stream, with the
  `.json` of a recording (`stream-core synthesize` writes them to a folder).
- `fake_vendor(root, scenarios=...)` / `stream-core serve DIR --scenario MODEL=PATH`: a fake
  vendor on loopback answering from recordings or scripted turns, by model name or in turn
  per model, with the latest requests kept (`server.requests`), and with `quota=Quota(...)`
  windowed quotas answered with the vendor's rate-limit headers and 429s;
  `stream-core record ...`: new recordings from live calls.
- The pytest plugin (installed with the package): the fixtures `faux_model`,
  `replay_client` and `fake_vendor`, and, with `pip install stream-core[testing]`, the
  contract suite: `pytest --stream-core-provider=my_pkg.my_provider
  --stream-core-fixtures=DIR`.

Nothing here imports pytest, respx or hypothesis: a plain install (no extra) can use the
helpers, `stream-core serve` and `stream-core synthesize`.
"""

from ._faux import (
    FauxModel,
    FauxTurn,
    faux_cut,
    faux_error,
    faux_message,
    faux_model,
    faux_stall,
    faux_text,
    faux_tool_call,
)
from ._faux_tools import faux_content, faux_server_message, faux_server_tool, faux_web_search
from ._replay import ReplayClient, load_recording, replay_client, replay_sequence
from ._serve import ANY_MODEL, FakeVendor, ServedRequest, fake_vendor, load_scenario
from ._serve_quota import Quota
from ._synthesize import Synthesized, vendor_bytes

__all__ = [
    "ANY_MODEL",
    "FakeVendor",
    "FauxModel",
    "FauxTurn",
    "Quota",
    "ReplayClient",
    "ServedRequest",
    "Synthesized",
    "fake_vendor",
    "faux_content",
    "faux_cut",
    "faux_error",
    "faux_message",
    "faux_model",
    "faux_server_message",
    "faux_server_tool",
    "faux_stall",
    "faux_text",
    "faux_tool_call",
    "faux_web_search",
    "load_recording",
    "load_scenario",
    "replay_client",
    "replay_sequence",
    "vendor_bytes",
]
