"""The stored turn: the four inputs of Algorithm 1 plus the turn's identity.

Parts are read tolerantly (unknown fields and part kinds are kept, not rejected),
because newer writers add kinds that older readers do not know.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

MAX_NESTING = 64
"""How deep lists and objects may nest inside a stored turn. Real agent history stays far below it; deeper
data cannot be rendered for a judge without recursion, so it is refused when stored, never later when read."""


def nesting_problem(value: Any, where: str, limit: int = MAX_NESTING) -> str | None:
    """Where ``value`` nests deeper than ``limit`` (a path such as ``response_payload.tool_calls[0].arguments.a``),
    or None. Iterative, so any depth is measured without recursion."""
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict):
            children = [(v, f"{path}.{k}" if len(path) < 200 else path, depth + 1) for k, v in item.items()]
        elif isinstance(item, list | tuple):
            children = [(v, f"{path}[{i}]" if len(path) < 200 else path, depth + 1) for i, v in enumerate(item)]
        else:
            continue
        if depth > limit:
            return f"{path}{'…' if len(path) >= 200 else ''} nests more than {limit} levels deep"
        stack.extend(children)
    return None


TOOL_CALL_KINDS = frozenset({"tool-call", "builtin-tool-call"})
TOOL_RETURN_KINDS = frozenset({"tool-return", "builtin-tool-return"})


def _absent(value: Any) -> bool:
    return value is None


class SourceMeta(BaseModel):
    """Where a tool's return came from, as the history recorded it (an MCP result's ``_meta``, an OTel
    ``execute_tool`` span's ``mcp.*`` / ``enduser.*`` attributes, a hosted MCP call's server label). Every field is
    optional: what the history does not carry stays None and reads "not recorded", never guessed."""

    model_config = ConfigDict(extra="allow", frozen=True)

    server: str | None = Field(None, exclude_if=_absent, description="the MCP server (or service) that answered")
    resource: str | None = Field(None, exclude_if=_absent, description="the resource read (an MCP resource URI)")
    principal: str | None = Field(None, exclude_if=_absent, description="the user or agent it was fetched for")
    tenant: str | None = Field(None, exclude_if=_absent, description="the tenant it was fetched for")
    scope: str | None = Field(None, exclude_if=_absent, description="the scope or permissions it was fetched under")


def _time_text(value: Any) -> Any:
    """A recorded time as text (an aware ``datetime`` as ISO 8601); a string is kept exactly as written."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def recorded_time(value: Any) -> datetime | None:
    """A time the history recorded (ISO 8601; ``Z`` accepted; a naive time read as UTC), or None when it is
    missing or unreadable: never a guess."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class MessagePart(BaseModel):
    """One part of a native model message (pydantic-ai shape). ``timestamp`` and ``provenance`` are what the
    history recorded of it (pydantic-ai parts carry ``timestamp``); absent in turns stored without them."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    part_kind: str = Field(
        description="tool-call, builtin-tool-call, tool-return, builtin-tool-return, "
        "user-prompt, system-prompt, text, retry-prompt, …"
    )
    tool_name: str | None = None
    tool_call_id: str | None = None
    args: Any = None
    content: Any = None
    outcome: str | None = Field(None, description="success | failed | denied | interrupted; missing = success")
    provenance: SourceMeta | None = Field(None, exclude_if=_absent, description="where a tool return came from")

    @property
    def kind(self) -> str:
        return self.part_kind

    @property
    def recorded_at(self) -> datetime | None:
        """The part's ``timestamp`` (kept where the history wrote it, so a stored turn's content is unchanged)."""
        return recorded_time((self.model_extra or {}).get("timestamp"))


class ModelMessage(BaseModel):
    """A native message: a request (to the model) or a response (from it)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: Literal["request", "response"] | str = "request"
    parts: list[MessagePart] = Field(default_factory=list)
    instructions: str | None = None

    @property
    def recorded_at(self) -> datetime | None:
        """The message's ``timestamp`` as the history wrote it (pydantic-ai's); None when it has none."""
        return recorded_time((self.model_extra or {}).get("timestamp"))


class FlatToolCall(BaseModel):
    """One flattened tool call of the response payload (the fallback path)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    arguments: Any = None
    response: Any = None
    made_at: str | None = Field(None, exclude_if=_absent, description="when the call was made (ISO 8601)")
    observed_at: str | None = Field(None, exclude_if=_absent, description="when its return came back (ISO 8601)")
    provenance: SourceMeta | None = Field(None, exclude_if=_absent, description="where its return came from")

    _times_text = field_validator("made_at", "observed_at", mode="before")(_time_text)


class ResponsePayload(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    tool_calls: list[FlatToolCall] = Field(default_factory=list)


class ChatMessage(BaseModel):
    """A request-payload message. Tool messages from earlier turns are history."""

    model_config = ConfigDict(extra="allow", frozen=True)

    role: str
    content: Any = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    @property
    def recorded_at(self) -> datetime | None:
        """The message's ``timestamp`` (or ``created_at``) as the history wrote it; None when it has none."""
        extra = self.model_extra or {}
        return recorded_time(extra.get("timestamp")) or recorded_time(extra.get("created_at"))


class RequestPayload(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    messages: list[ChatMessage] = Field(default_factory=list)


class StoredTurn(BaseModel):
    """A persisted agent turn, exactly as a platform keeps it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    turn_id: str = Field(min_length=1, max_length=256)
    model: str | None = Field(None, description="The model that produced the turn (litellm model string).")
    agent: str | None = Field(None, description="The agent's name, for display.")
    response: str = Field(
        description="The final response text the user saw; empty only for a turn that ended with tool calls and "
        "no reply (its actions are what can be traced)."
    )
    query: str | None = Field(
        None, description="The user's query; when absent it is the last user message of the request payload."
    )
    created_at: datetime | None = None
    system_prompt: str | None = None
    system_prompt_versioned: StrictBool = Field(  # true or false: "yes" or 1 is refused, not read as true
        False,
        description="True when system_prompt is a snapshot taken with the turn; otherwise it is the current "
        "text and is flagged unversioned.",
    )
    attachments: list[str] = Field(
        default_factory=list, description="Names of attached files whose bytes were not kept (unscorable)."
    )
    model_messages: list[ModelMessage] = Field(default_factory=list)
    response_payload: ResponsePayload = Field(default_factory=ResponsePayload)
    request_payload: RequestPayload = Field(default_factory=RequestPayload)
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        exclude_if=lambda v: not v,  # left out when empty: turns stored without it keep their content digest
        description="What the platform recorded about the run besides its messages (an AgentDojo run's suite, "
        "task ids, attack, injections, utility and security), kept as it was; no estimator reads it.",
    )

    @field_validator("turn_id")
    @classmethod
    def _turn_id_printable(cls, v: str) -> str:
        """An id is shown, logged and put in URLs: control characters (NUL, newlines, escapes) and lone
        surrogates are refused rather than stored."""
        bad = next((c for c in v if unicodedata.category(c) in ("Cc", "Cs")), None)
        if bad is not None:
            raise ValueError(f"turn_id must not contain control characters (found U+{ord(bad):04X})")
        return v

    @field_validator("model_messages", "response_payload", "request_payload", "metadata", mode="before")
    @classmethod
    def _nesting_capped(cls, v: Any, info: ValidationInfo) -> Any:
        problem = nesting_problem(v, str(info.field_name))
        if problem is not None:
            raise ValueError(f"{problem}: flatten or trim the data (at most {MAX_NESTING} levels are stored)")
        return v

    @model_validator(mode="after")
    def _answer_or_actions(self) -> StoredTurn:
        """A turn carries the answer the user saw, or — when the agent stopped after its tool calls without
        replying — the calls it made: a blank response is refused (naming ``response``) on a turn with no call."""
        if self.response.strip() or self.has_tool_calls():
            return self
        error = PydanticCustomError(
            "blank_response",
            "response must contain the text the user saw; it may be empty only on a turn that made tool calls "
            "(response_payload.tool_calls or tool-call parts of model_messages) and ended without a reply",
        )
        raise ValidationError.from_exception_data(
            type(self).__name__, [InitErrorDetails(type=error, loc=("response",), input=self.response)]
        )

    def has_tool_calls(self) -> bool:
        """Whether the turn made a tool call (a flat call, or a tool-call part of its own model messages)."""
        return bool(self.response_payload.tool_calls) or any(
            part.part_kind in TOOL_CALL_KINDS for message in self.model_messages for part in message.parts
        )

    def effective_query(self) -> str:
        """The current user query: explicit, else the last user message with text."""
        if self.query:
            return self.query
        for m in reversed(self.request_payload.messages):
            if m.role == "user" and content_text(m.content).strip():
                return content_text(m.content)
        for msg in reversed(self.model_messages):
            for part in reversed(msg.parts):
                if part.part_kind == "user-prompt":
                    text = content_text(part.content)
                    if text.strip():
                        return text
        return ""


def content_text(content: Any) -> str:
    """Text of a message content that is a string or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for item in content:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict):
                text = item.get("text", item.get("content"))
                if isinstance(text, str):
                    out.append(text)
        return "\n".join(out)
    return ""
