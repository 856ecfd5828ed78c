"""MCP tools of the intents app. Thin: validate, call a service, shape the answer."""

from __future__ import annotations

from typing import Any, Literal

from django.utils import timezone
from pydantic import Field

from intents import services
from operator_site.face.dispatch import ToolCall
from operator_site.face.registry import ToolArgs, ToolClass, tool

DirectiveKind = Literal["quiet", "topic_mute", "focus"]
ACTOR_FIELD = Field(
    None,
    description="Accepted for compatibility and never trusted: the acting identity is always the "
    "bearer token's principal.",
)


class SetDirectiveArgs(ToolArgs):
    kind: DirectiveKind = Field(
        description="quiet: hold every notification except safety notices; topic_mute: hold those about "
        "`topic`; focus: hold everything not about `topic`."
    )
    topic: str | None = Field(
        None, min_length=1, max_length=100, description="Required for topic_mute and focus; not for quiet."
    )
    minutes: int = Field(
        services.DEFAULT_DIRECTIVE_MINUTES,
        ge=1,
        le=services.MAX_DIRECTIVE_MINUTES,
        description="How long the directive stays in force (1..1440, default 60).",
    )
    reason: str | None = Field(None, max_length=500, description="Why, in the person's words.")
    actor: Any = ACTOR_FIELD


@tool(
    "operator_set_directive",
    tool_class=ToolClass.WRITE,
    args=SetDirectiveArgs,
    title="Set a directive",
    examples=[
        {"kind": "quiet", "minutes": 90, "reason": "deep work until lunch"},
        {"kind": "topic_mute", "topic": "newsletters", "minutes": 1440},
        {"kind": "focus", "topic": "tax return"},
    ],
)
def set_directive(call: ToolCall, args: SetDirectiveArgs) -> dict[str, Any]:
    """Set a short-lived voice directive that shapes outbound contact: `quiet`, `topic_mute` (a topic)
    or `focus` (a topic), for `minutes` (default 60, at most 1440). A newer directive of the same kind
    and topic replaces the one in force. Safety notices are never held by directives."""
    now = timezone.now()
    directive, superseded = services.set_directive(
        principal=call.principal,
        kind=args.kind,
        topic=args.topic,
        minutes=args.minutes,
        reason=args.reason,
        now=now,
    )
    return {"ok": True, "directive": services.directive_dict(directive, now), "superseded": superseded}


class ClearDirectiveArgs(ToolArgs):
    id: int | None = Field(None, ge=1, description="Lift this one directive.")
    kind: DirectiveKind | None = Field(None, description="Lift every directive of this kind.")
    all: bool | None = Field(None, description="true: lift every directive in force.")
    actor: Any = ACTOR_FIELD


@tool(
    "operator_clear_directive",
    tool_class=ToolClass.WRITE,
    args=ClearDirectiveArgs,
    title="Clear directives",
    examples=[{"kind": "quiet"}, {"all": True}, {"id": 12}],
)
def clear_directive(call: ToolCall, args: ClearDirectiveArgs) -> dict[str, Any]:
    """Lift one directive (`id`), every directive of one `kind`, or all of them (`all: true`).
    Give exactly one of the three."""
    now = timezone.now()
    cleared = services.clear_directives(
        principal=call.principal, directive_id=args.id, kind=args.kind, everything=bool(args.all), now=now
    )
    return {"ok": True, "cleared": [services.directive_dict(d, now) for d in cleared], "count": len(cleared)}


class ListDirectivesArgs(ToolArgs):
    pass


@tool(
    "operator_list_directives",
    tool_class=ToolClass.READ,
    args=ListDirectivesArgs,
    title="List directives",
    examples=[{}],
)
def list_directives(call: ToolCall, args: ListDirectivesArgs) -> dict[str, Any]:
    """The directives currently shaping outbound contact: in force and unexpired, soonest expiry
    first."""
    now = timezone.now()
    directives = [services.directive_dict(d, now) for d in services.active_directives(now)]
    return {"ok": True, "now": now, "directives": directives, "count": len(directives)}
