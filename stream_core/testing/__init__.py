"""Testing code that uses stream-core, and providers written for it, without the network.

- `faux_model(turns)`: a scripted model (api `faux`) answering through the real pipeline.
- `replay_client(recording)` / `replay_sequence(recordings)`: an `httpx.AsyncClient`
  serving recorded vendor bodies, for `StreamOptions(client=...)`.
- `stream-core serve DIR` / `stream-core record ...`: a fake vendor on loopback, and new
  recordings from live calls (see the CLI).
- The contract suite as a pytest plugin (`pip install stream-core[testing]`):
  `pytest --stream-core-provider=my_pkg.my_provider --stream-core-fixtures=DIR`.

Nothing here imports respx or hypothesis: a plain install can use the helpers.
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
from ._replay import ReplayClient, load_recording, replay_client, replay_sequence

__all__ = [
    "FauxModel",
    "FauxTurn",
    "ReplayClient",
    "faux_cut",
    "faux_error",
    "faux_message",
    "faux_model",
    "faux_stall",
    "faux_text",
    "faux_tool_call",
    "load_recording",
    "replay_client",
    "replay_sequence",
]
