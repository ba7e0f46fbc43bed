"""Ready-made message roles of a harness's own: records kept in the history as they are, and
sent to the model as the user message each one converts to.

Registered when this module loads (at the first role lookup, or the first use of one of
these names), so `load_messages` returns them as instances.
A harness defines more the same way (`CustomMessage` + `register_message_role`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .._content import _now_ms
from .._types import CustomMessage, Usage, UserMessage, register_message_role

__all__ = ["BashExecution", "BranchSummary", "CompactionSummary"]


@register_message_role
class CompactionSummary(CustomMessage):
    """The summary that replaced the earlier turns of a conversation (compaction).

    Sent as one user message: a lead saying the earlier turns were compacted, then the
    summary inside `<summary>` tags."""

    role: Literal["compaction_summary"] = "compaction_summary"
    summary: str
    tokens_before: int | None = None
    """The size of the history it replaced, in tokens (for the harness; not sent)."""
    usage: Usage | None = None
    """The summed usage and cost of the calls it replaced (`compact` sets it), so
    `total_usage` over a compacted history still counts them (not sent)."""
    timestamp: int = Field(default_factory=_now_ms)

    def to_messages(self) -> list[UserMessage]:
        text = (
            "The earlier turns of this conversation were compacted into this summary:\n\n"
            f"<summary>\n{self.summary}\n</summary>"
        )
        return [UserMessage(content=text, timestamp=self.timestamp)]


@register_message_role
class BranchSummary(CustomMessage):
    """The summary of a branch of the conversation that was left (the harness went back to
    an earlier point and continued from there).

    Sent as one user message: a lead, then the summary inside `<summary>` tags."""

    role: Literal["branch_summary"] = "branch_summary"
    summary: str
    from_id: str | None = None
    """The harness's id of the point the branch left from (not sent)."""
    timestamp: int = Field(default_factory=_now_ms)

    def to_messages(self) -> list[UserMessage]:
        text = (
            "This conversation went back to an earlier point; what happened on the branch "
            f"it left is summarized here:\n\n<summary>\n{self.summary}\n</summary>"
        )
        return [UserMessage(content=text, timestamp=self.timestamp)]


@register_message_role
class BashExecution(CustomMessage):
    """A shell command run outside the model's tool calls (the user's `!ls` in a coding
    harness), with its output.

    Sent as one user message: the command, its output and how it ended (exit code,
    cancelled, output truncated)."""

    role: Literal["bash_execution"] = "bash_execution"
    command: str
    output: str = ""
    exit_code: int | None = None
    """None: unknown (the command was cancelled or killed before it exited)."""
    cancelled: bool = False
    truncated: bool = False
    """The output was cut to fit (the harness keeps the full output elsewhere)."""
    timestamp: int = Field(default_factory=_now_ms)

    def to_messages(self) -> list[UserMessage]:
        lines = [
            "A shell command was run:",
            f"<command>\n{self.command}\n</command>",
            f"<output>\n{self.output}\n</output>" if self.output else "(no output)",
        ]
        if self.truncated:
            lines.append("The output was truncated.")
        if self.cancelled:
            lines.append("The command was cancelled before it finished.")
        if self.exit_code is not None:
            lines.append(f"Exit code: {self.exit_code}")
        return [UserMessage(content="\n".join(lines), timestamp=self.timestamp)]
