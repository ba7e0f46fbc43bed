"""Amazon Nova's system tools on Bedrock Converse: the `ServerTool` kinds the API takes,
the `toolConfig.tools` entries they become, and which models run them (Nova only)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stream_core import Model, ServerTool, Tool
from stream_core.provider import server_tool_objects as _objects
from stream_core.provider import server_tools_of

__all__ = ["SERVER_TOOLS", "SYSTEM_TOOLS", "server_tool_objects", "server_tool_refusal"]

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
        fields = ("max_uses", "allowed_domains", "blocked_domains", "user_location")
        unsaid = [f for f in fields if getattr(tool, f) is not None]
        if unsaid:
            raise ValueError(
                f"ServerTool({tool.kind!r}): {API} runs it as Nova's {name}, which takes "
                f"no {', '.join(unsaid)} (leave them out)"
            )
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


def server_tool_objects(model: Model, tools: Iterable[Tool | ServerTool] | None) -> list[Any]:
    """The `toolConfig.tools` entries of the context's server tools (native ones as given)."""
    for tool in server_tools_of(tools):
        refusal = server_tool_refusal(model, tool)
        if refusal is not None:
            raise ValueError(refusal)
    return _objects(tools, SERVER_TOOLS)
