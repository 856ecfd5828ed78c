"""MCP tools of the beliefs app (docs/world-model.md). Thin: validate, call a service, shape the answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from beliefs import services
from beliefs.schemas import MAX_CHANGES, BeliefChange, BeliefKind
from operator_site.evidence import QUOTE_DESCRIPTION, Confirmed
from operator_site.face.dispatch import ToolCall
from operator_site.face.registry import CLAIMED_ACTOR, ToolArgs, ToolClass, tool


# --- operator_user_world_model ---------------------------------------------------------------------
class WorldModelArgs(ToolArgs):
    as_of_version: int | None = Field(None, ge=0, description="The model as it stood at this version.")
    include_retired: bool | None = Field(None, description="true: retired beliefs too.")
    kind: BeliefKind | None = Field(None, description="Only this kind.")


@tool(
    "operator_user_world_model",
    tool_class=ToolClass.READ,
    snapshot=True,
    args=WorldModelArgs,
    title="Read the world model",
    examples=[{}, {"kind": "identity"}, {"as_of_version": 3, "include_retired": True}],
)
def user_world_model(call: ToolCall, args: WorldModelArgs) -> dict[str, Any]:
    """The person's evidence-backed model: its version (send it as expected_version when writing),
    active beliefs by kind (identity, goal, behavior_policy, constraint are high-stakes), each with
    value, confidence, source principal (human or agent), the version that set it, its evidence
    (instruction id, quoted span); and unacknowledged high-stakes notices."""
    return services.world_model_snapshot(
        as_of_version=args.as_of_version, include_retired=bool(args.include_retired), kind=args.kind
    )


# --- operator_update_world_model -------------------------------------------------------------------
class UpdateWorldModelArgs(ToolArgs):
    changes: list[BeliefChange] = Field(
        min_length=1,
        max_length=MAX_CHANGES,
        description="All applied, or none.",
    )
    confirmedInConversation: Confirmed = None  # camelCase: the published name
    confirmationQuote: str | None = Field(  # camelCase: the published name
        None,
        max_length=2000,
        description=QUOTE_DESCRIPTION,
    )
    expected_version: int | None = Field(
        None,
        ge=0,
        description=(
            "The version you read. A newer one (or a race) writes nothing and answers "
            "retry: true, current_version: re-read, try again."
        ),
    )
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_update_world_model",
    tool_class=ToolClass.GATED,
    args=UpdateWorldModelArgs,
    title="Update the world model",
    examples=[
        {"changes": [{"op": "add", "kind": "preference", "key": "coffee", "value": "flat white, no sugar"}]},
        {
            "changes": [{"op": "update", "kind": "identity", "key": "name", "value": "Iain"}],
            "confirmedInConversation": True,
            "confirmationQuote": "My name is Iain from now on.",
            "expected_version": 4,
        },
        {"changes": [{"op": "retire", "kind": "note", "key": "parking"}]},
    ],
)
def update_world_model(call: ToolCall, args: UpdateWorldModelArgs) -> dict[str, Any]:
    """Add, update or retire beliefs about the person, in one version. Low-stakes kinds (preference,
    note, project, risk) apply freely; high-stakes ones (identity, goal, behavior_policy,
    constraint) need confirmedInConversation: true and a confirmationQuote. A refusal names the
    failed rule and what the quote lacked, and writes nothing; or propose the change
    (operator_record_action_intent). High-stakes writes notify the person with a one-tap revert."""
    return services.update_world_model(
        principal=call.principal,
        changes=args.changes,  # validated models: the service takes them as they are
        confirmed=args.confirmedInConversation,
        quote=args.confirmationQuote,
        expected_version=args.expected_version,
    )


# --- operator_revert_world_model -------------------------------------------------------------------
class RevertWorldModelArgs(ToolArgs):
    to_version: int | None = Field(
        None,
        ge=0,
        description=(
            "Restore the whole model to this version instead; an agent only across its own "
            "changes, and never putting back an undone high-stakes change (that needs the "
            "person's fresh words)."
        ),
    )
    expected_version: int | None = Field(None, ge=0, description="The version you read.")
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_revert_world_model",
    tool_class=ToolClass.WRITE,
    args=RevertWorldModelArgs,
    title="Revert the world model",
    examples=[{}, {"to_version": 7}],
)
def revert_world_model(call: ToolCall, args: RevertWorldModelArgs) -> dict[str, Any]:
    """Undo the last unreverted world-model change — an agent's own, or for the person anyone's —
    restoring exactly what it superseded despite other writes since (revert_conflict if a later
    version changed the same beliefs). A revert is a new version; reverting a high-stakes change
    notifies the person."""
    return services.REVERTER.revert(
        principal=call.principal, to_version=args.to_version, expected_version=args.expected_version
    )


# --- operator_record_instruction -------------------------------------------------------------------
class RecordInstructionArgs(ToolArgs):
    text: str = Field(min_length=1, max_length=20_000, description="What was said.")
    kind: Literal["instruction", "comment"] = Field(
        "instruction", description="An instruction asks to do or remember."
    )
    channel: str | None = Field(None, max_length=40, description="Where: chat, voice, email…")
    refs: list[str | int] | None = Field(
        None, max_length=20, description="Task or intent ids, links it refers to."
    )
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_record_instruction",
    tool_class=ToolClass.WRITE,
    args=RecordInstructionArgs,
    title="Record an instruction",
    examples=[
        {"text": "Please call me Iain from now on.", "kind": "instruction", "channel": "chat"},
        {"text": "Good call on the dentist, thanks.", "kind": "comment", "refs": ["task:12"]},
    ],
)
def record_instruction(call: ToolCall, args: RecordInstructionArgs) -> dict[str, Any]:
    """Record a human instruction or comment, verbatim. Only rows recorded under a human's token are
    human-authored, the only source of a confirmationQuote; an agent's rows are never evidence."""
    row = services.record_instruction(
        principal=call.principal, text=args.text, kind=args.kind, channel=args.channel, refs=args.refs
    )
    answer: dict[str, Any] = {"ok": True, "instruction": services.instruction_dict(row)}
    answer["evidence_eligible"] = row.human_authored
    if not row.human_authored:
        answer["note"] = "Recorded by an agent: kept in the record, never usable as confirmation evidence."
    return answer
