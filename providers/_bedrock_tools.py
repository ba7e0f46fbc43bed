"""Amazon Nova's system tools on Bedrock Converse: the `ServerTool` kinds the API takes,
the `toolConfig.tools` entries they become, and which models run them (Nova only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stream_core import Model, ServerTool
from stream_core.provider import refuse_unsaid_options

__all__ = ["SERVER_TOOLS", "SYSTEM_TOOLS", "server_tool_refusal"]

API = "bedrock-converse-stream"

SYSTEM_TOOLS: dict[str, str] = {
    "nova_grounding": "web_search",
    "nova_code_interpreter": "code_execution",
}
"""Amazon Nova's system tools (the `systemTool` names AWS documents) -> portable kind."""
_NOVA = "amazon.nova"
"""What the id of a model that runs Nova's system tools holds."""


def _system_tool(name: str) -> Callable[[ServerTool], dict[str, Any]]:
    def make(tool: ServerTool) -> dict[str, Any]:
        refuse_unsaid_options(tool, (), f"{API} runs it as Nova's {name}, which")
        return {"systemTool": {"name": name}}

    return make


SERVER_TOOLS: dict[str, Callable[[ServerTool], dict[str, Any]]] = {
    kind: _system_tool(name) for name, kind in SYSTEM_TOOLS.items()
}
"""`WireAPI.server_tools`: portable kind -> the Converse tool object."""


def server_tool_refusal(model: Model, tool: ServerTool) -> str | None:
    """`WireAPI.server_tool_refusal`: only Nova models run Nova's system tools."""
    if tool.kind == "native" or _NOVA in model.id:
        return None
    return (
        f"ServerTool({tool.kind!r}): {API} runs it as an Amazon Nova system tool, "
        f"which only Nova models take (not {model.id})"
    )
