"""Every power the operator grants, in one place: what it may call on the person's brain, per caller
(downstream, enforced by `runs.brain.call_brain`), and what scoped principals may call on the
operator, per role (upstream, enforced by each principal's tool allowlist at the face). Approval is
withheld from every token. docs/powers.md is rendered from this module (`manage.py operator_powers`).
"""

from __future__ import annotations

from types import MappingProxyType

# --- downstream: the operator as a client of the brain ---------------------------------------------
EXECUTOR_TOOLS: frozenset[str] = frozenset(
    {"files_write", "files_search", "memory_recall", "actions_workspace_run"}
)
# Never the search tools; the observe module imports no model, vector or embedding library.
OBSERVE_TOOLS: frozenset[str] = frozenset(
    {"actions_shell_run", "machines_command_exec", "actions_workspace_run"}
)

DOWNSTREAM = MappingProxyType({"executor": EXECUTOR_TOOLS, "observe": OBSERVE_TOOLS})

# --- upstream: scoped principals calling the operator ----------------------------------------------
# The two autonomous runners draw from these five; neither may touch an intent's lifecycle.
RUNNER_POOL: frozenset[str] = frozenset(
    {
        "operator_record_action_intent",
        "operator_update_task",
        "operator_update_decision",
        "operator_record_instruction",
        "operator_context_packet",
    }
)
MORNING_RUNNER_TOOLS: tuple[str, ...] = (
    "operator_context_packet",
    "operator_update_task",
    "operator_record_action_intent",
)
NIGHT_RUNNER_TOOLS: tuple[str, ...] = (
    "operator_context_packet",
    "operator_update_task",
    "operator_update_decision",
    "operator_record_instruction",
)
# Onboarding reads the context and nothing else: no write, send or action tool.
ONBOARDING_TOOLS: tuple[str, ...] = (
    "operator_context_packet",
    "operator_user_world_model",
    "operator_list_directives",
    "operator_history",
)

ROLES = MappingProxyType(
    {
        "morning-runner": MORNING_RUNNER_TOOLS,
        "night-runner": NIGHT_RUNNER_TOOLS,
        "onboarding": ONBOARDING_TOOLS,
    }
)

# --- withheld ------------------------------------------------------------------------------------------
WITHHELD = MappingProxyType(
    {
        "approval": "Approving an intent or a decision is a human act: `intents` exposes it as a library "
        "function for human channels (the admin, the human API), and no tool calls it.",
        "ending a run": "Ending a run someone else holds is the person's act (the admin's \"End this run\", "
        "`runs.lock.end_run`, refused for any principal but an active human): a token may finish only "
        "the run whose fencing token it holds.",
    }
)


def render_markdown() -> str:
    """docs/powers.md: every power granted and withheld (as a table), from the code.

    `python3 manage.py operator_powers > docs/powers.md` regenerates it; a test fails when the file
    and the code disagree.
    """
    from operator_site.face import registry

    classes = {spec.name: str(spec.tool_class) for spec in registry.all_tools()}
    roles = list(ROLES)
    lines = [
        "# Powers: granted and withheld",
        "",
        "Generated from the power table and the tool registry by `python3 manage.py operator_powers`;",
        "a test fails when this file and the code disagree.",
        "",
        "## Tools of the operator, and who may call them",
        "",
        "A principal without an allowlist (the owner, a full-access agent) may call every tool. Scoped",
        "principals may call only their list; any other tool is refused before it runs.",
        "",
        "| tool | class | " + " | ".join(roles) + " |",
        "|---|---|" + "---|" * len(roles),
    ]
    for name in registry.DECLARED_TOOLS:
        marks = " | ".join("yes" if name in ROLES[role] else "—" for role in roles)
        lines.append(f"| `{name}` | {classes.get(name, 'not built yet')} | {marks} |")
    lines += [
        "",
        "## What the operator may call on the person's brain",
        "",
        "Enforced by `runs.brain.call_brain`, which raises before any request object exists:",
        '"<caller> refused: <tool> is not in the enumerated ian-brain tool allowlist". Every call has one',
        "total deadline (`BRAIN_TIMEOUT_S`, default 60 s) and carries only `BRAIN_TOKEN`.",
        "",
        "| caller | may call |",
        "|---|---|",
    ]
    for caller, tools in DOWNSTREAM.items():
        lines.append(f"| {caller} | {', '.join(f'`{t}`' for t in sorted(tools))} |")
    lines += ["", "## Withheld from every token", ""]
    for power, why in WITHHELD.items():
        lines.append(f"- **{power}**: {why}")
    return "\n".join(lines) + "\n"
