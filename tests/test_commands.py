"""Management commands: operator_token create/list/revoke, and the owner bootstrap `serve` runs."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from operator_site.bootstrap import ensure_owner
from operator_site.face.auth import authenticate
from operator_site.models import Principal

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("operator_token", *args, stdout=out)
    return out.getvalue()


def test_create_prints_the_token_alone_on_the_last_line_and_it_works() -> None:
    output = _run(
        "create", "night-runner", "--agent", "--tools", "operator_list_directives,operator_set_directive"
    )
    token = output.strip().splitlines()[-1]
    assert token.startswith("opk_") and " " not in token
    principal = authenticate(token)
    assert principal.name == "night-runner"
    assert principal.kind == "agent"
    assert principal.tools == ["operator_list_directives", "operator_set_directive"]


def test_create_refuses_duplicates_unknown_tools_and_missing_kind() -> None:
    _run("create", "scout", "--agent")
    with pytest.raises(CommandError, match="exists"):
        _run("create", "scout", "--agent")
    with pytest.raises(CommandError, match="unknown tool"):
        _run("create", "other", "--agent", "--tools", "operator_approve_intent")
    with pytest.raises(CommandError, match="--human or --agent"):
        _run("create", "third")
    assert list(Principal.objects.values_list("name", flat=True)) == ["scout"]


def test_rotate_replaces_the_token_and_revoke_disables_it() -> None:
    old = _run("create", "scout", "--agent").strip().splitlines()[-1]
    new = _run("create", "scout", "--rotate").strip().splitlines()[-1]
    assert authenticate(old) is None
    assert authenticate(new).name == "scout"
    assert "revoked 'scout'" in _run("revoke", "scout")
    assert authenticate(new) is None
    listing = _run("list")
    assert "scout\tagent\trevoked" in listing
    assert new not in listing


def test_a_human_can_be_linked_to_an_admin_login() -> None:
    user = get_user_model().objects.create_user("ian", is_staff=True)
    token = _run("create", "ian", "--human", "--user", "ian").strip().splitlines()[-1]
    assert authenticate(token).user == user
    with pytest.raises(CommandError, match="only a human"):
        _run("create", "bot", "--agent", "--user", "ian")


def test_ensure_owner_creates_token_and_login_once(settings) -> None:
    settings.OPERATOR_TOKEN = ""
    out = io.StringIO()
    owner = ensure_owner(out)
    first = out.getvalue()
    token = next(line.split("=", 1)[1] for line in first.splitlines() if "OPERATOR_TOKEN=" in line)
    assert authenticate(token) == owner
    assert owner.user.is_staff and owner.user.is_superuser
    assert "password" in first
    again = io.StringIO()
    ensure_owner(again)
    assert token not in again.getvalue() and "password" not in again.getvalue()
    assert Principal.objects.count() == 1
    assert get_user_model().objects.count() == 1


@pytest.mark.parametrize(
    ("args", "name", "role"),
    [
        (["--runner", "morning"], "morning-runner", "morning-runner"),
        (["--runner", "night"], "night-runner", "night-runner"),
        (["--onboarding"], "onboarding", "onboarding"),
        (["nightly-bot", "--runner", "night"], "nightly-bot", "night-runner"),
    ],
)
def test_scoped_roles_take_their_tools_from_the_powers_module(args: list[str], name: str, role: str) -> None:
    from operator_site.powers import ROLES

    token = _run("create", *args).strip().splitlines()[-1]
    principal = authenticate(token)
    assert (principal.name, principal.kind) == (name, "agent")
    assert principal.tools == list(ROLES[role])
    assert "operator_update_action_intent" not in principal.tools
    with pytest.raises(CommandError, match="--tools does not apply"):
        _run("create", "x", "--runner", "morning", "--tools", "operator_state")
