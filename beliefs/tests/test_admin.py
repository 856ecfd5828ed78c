"""The human console through Django's test client: belief and version pages with readable diffs,
"undo this change" and "revert to here" (login required, GET changes nothing, POST acts once and
records who), instructions added by a person, and the one-tap link from a notice."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from beliefs import services
from beliefs.models import Belief, WorldModelVersion
from beliefs.tests.helpers import add, update
from operator_site import revert_links
from operator_site.models import Instruction, Notification


def _cell(tag: str, text: bytes) -> bytes:
    """A before/after cell as the diff renders it: agent text direction-isolated (operator_site.display)."""
    return f"<{tag}>".encode() + b'<bdi class="op-agent">' + text + f"</bdi></{tag}>".encode()


pytestmark = pytest.mark.django_db

UPDATE = "operator_update_world_model"


@pytest.fixture
def history(agent, owner, say, tool):
    """v1 the person's name (high stakes), v2 the agent renames it (high stakes, notified), v3 a note."""
    say("My name is Ian, that is all.")
    tool(
        owner.principal,
        UPDATE,
        {
            "changes": [add("identity", "name", "Ian")],
            "confirmedInConversation": True,
            "confirmationQuote": "My name is Ian, that is all.",
        },
    )
    say("Please use the name Iain <b>bold</b> from now on.")
    made = tool(
        agent.principal,
        UPDATE,
        {
            "changes": [update("identity", "name", "Iain <b>bold</b>")],
            "confirmedInConversation": True,
            "confirmationQuote": "Please use the name Iain <b>bold</b> from now on.",
        },
    )
    assert made["ok"] is True, made
    tool(agent.principal, UPDATE, {"changes": [add("note", "parking", "level 2")]})
    return made


@pytest.fixture
def logged_in(client, owner):
    client.login(username="owner", password="pw-owner-123")
    return client


@pytest.fixture
def helper_login(client, django_user_model):
    """A staff login that is not linked to any human principal: it may look, never act."""
    django_user_model.objects.create_user(
        "helper", password="pw-helper-123", is_staff=True, is_superuser=True
    )
    client.login(username="helper", password="pw-helper-123")
    return client


def undo_url(number: int) -> str:
    return reverse("admin:beliefs_worldmodelversion_undo", args=[number])


def restore_url(number: int) -> str:
    return reverse("admin:beliefs_worldmodelversion_restore", args=[number])


def _expected(page) -> int:
    return int(re.search(rb'name="expected_version" value="(\d+)"', page.content).group(1))


def test_the_pages_need_a_staff_login(client, history) -> None:
    for url in (undo_url(2), restore_url(1), reverse("admin:beliefs_belief_changelist")):
        response = client.get(url)
        assert response.status_code == 302
        assert "/admin/login/" in response["Location"]
    response = client.post(undo_url(2), {"expected_version": "3"})
    assert response.status_code == 302
    assert WorldModelVersion.objects.count() == 3


def test_belief_and_version_pages_show_readable_diffs(logged_in, history) -> None:
    belief = Belief.objects.get(key="name")
    page = logged_in.get(reverse("admin:beliefs_belief_change", args=[belief.pk]))
    assert page.status_code == 200
    # the key isolated from the words around it (operator_site.display.Named)
    assert 'identity/<bdi class="op-agent">name</bdi> · value'.encode() in page.content
    assert b"Iain &lt;b&gt;bold&lt;/b&gt;" in page.content  # escaped, never rendered as markup
    assert b"<b>bold</b>" not in page.content
    listing = logged_in.get(reverse("admin:beliefs_belief_changelist") + "?stakes=high")
    assert listing.status_code == 200
    assert b"parking" not in listing.content and b"name" in listing.content
    version = logged_in.get(reverse("admin:beliefs_worldmodelversion_change", args=[2]))
    assert version.status_code == 200
    assert undo_url(2).encode() in version.content and restore_url(2).encode() in version.content
    assert _cell("del", b"Ian") in version.content
    assert b"use the name Iain &lt;b&gt;bold&lt;/b&gt; from now on" in version.content
    assert logged_in.get(reverse("admin:beliefs_worldmodelversion_changelist")).status_code == 200


def test_undo_this_change_get_shows_post_acts_once_and_records_the_human(logged_in, owner, history) -> None:
    page = logged_in.get(undo_url(2))
    assert page.status_code == 200
    assert b"Undo this change" in page.content
    assert _cell("del", b"Iain &lt;b&gt;bold&lt;/b&gt;") in page.content
    assert _cell("ins", b"Ian") in page.content
    assert WorldModelVersion.objects.count() == 3  # GET changed nothing
    expected = _expected(page)
    assert expected == 3

    done = logged_in.post(undo_url(2), {"expected_version": expected})
    assert done.status_code == 302
    assert done["Location"] == reverse("admin:beliefs_worldmodelversion_change", args=[4])
    version = WorldModelVersion.objects.get(number=4)
    assert (version.operation, version.reverts_id, version.principal_id) == ("undo", 2, owner.principal.id)
    assert Belief.objects.get(key="name").value == "Ian"
    assert Belief.objects.get(key="parking").value == "level 2"  # v3 keeps its change
    # A revert of a high-stakes change notifies too.
    assert Notification.objects.filter(kind="world_model_revert", subject_id=4).count() == 1

    # The double click: same form again — refused, nothing written.
    again = logged_in.post(undo_url(2), {"expected_version": expected})
    assert again.status_code == 409
    assert WorldModelVersion.objects.count() == 4


def test_a_stale_page_is_refused_and_shows_the_current_diff(logged_in, agent, tool, history) -> None:
    page = logged_in.get(undo_url(3))
    tool(agent.principal, UPDATE, {"changes": [add("note", "gym", "tuesdays")]})  # the model moves on
    stale = logged_in.post(undo_url(3), {"expected_version": _expected(page)})
    assert stale.status_code == 409
    assert b"changed since this page was shown" in stale.content
    assert WorldModelVersion.objects.count() == 4
    assert _expected(stale) == 4
    missing = logged_in.post(undo_url(3), {})
    assert missing.status_code == 400
    assert WorldModelVersion.objects.count() == 4


def test_undo_refuses_a_conflict_and_offers_no_button(logged_in, history) -> None:
    page = logged_in.get(undo_url(1))  # v2 changed the same belief afterwards
    assert page.status_code == 200
    assert b"version(s) 2" in page.content
    assert b'name="expected_version"' not in page.content
    refused = logged_in.post(undo_url(1), {"expected_version": "3"})
    assert refused.status_code == 409
    assert WorldModelVersion.objects.count() == 3


def test_revert_to_here_restores_the_whole_model(logged_in, owner, history) -> None:
    page = logged_in.get(restore_url(1))
    assert page.status_code == 200
    assert b"Undoes the effect of version(s) 2, 3" in page.content
    assert WorldModelVersion.objects.count() == 3
    done = logged_in.post(restore_url(1), {"expected_version": _expected(page)})
    assert done.status_code == 302
    version = WorldModelVersion.objects.get(number=4)
    assert (version.operation, version.restores_to, version.actor) == ("restore", 1, "owner")
    assert list(Belief.objects.values_list("key", "value")) == [("name", "Ian")]
    assert logged_in.get(restore_url(0)).status_code == 200  # the empty model is a version too
    assert logged_in.get(restore_url(99)).status_code == 404


def test_a_staff_login_without_a_human_principal_may_look_but_not_act(helper_login, history) -> None:
    page = helper_login.get(undo_url(3))
    assert page.status_code == 200
    assert b"can look, but not revert" in page.content
    refused = helper_login.post(undo_url(3), {"expected_version": "3"})
    assert refused.status_code == 403
    assert helper_login.post(restore_url(1), {"expected_version": "3"}).status_code == 403
    assert WorldModelVersion.objects.count() == 3
    assert helper_login.get(reverse("admin:operator_site_instruction_add")).status_code == 403


def test_the_admin_actions_lead_to_the_confirmation_pages(logged_in, history) -> None:
    url = reverse("admin:beliefs_worldmodelversion_changelist")
    response = logged_in.post(url, {"action": "undo_selected", "_selected_action": ["3"]})
    assert response.status_code == 302 and response["Location"] == undo_url(3)
    response = logged_in.post(url, {"action": "revert_to_selected", "_selected_action": ["1"]})
    assert response["Location"] == restore_url(1)
    assert WorldModelVersion.objects.count() == 3


def test_a_person_adds_an_instruction_from_the_admin_and_it_is_evidence(
    logged_in, owner, agent, tool
) -> None:
    response = logged_in.post(
        reverse("admin:operator_site_instruction_add"),
        {"text": "My diet is vegetarian these days, remember that.", "kind": "instruction", "channel": ""},
    )
    assert response.status_code == 302, response.content[:2000]
    row = Instruction.objects.get()
    assert (row.human_authored, row.actor, row.channel) == (True, "owner", "admin")
    made = tool(
        agent.principal,
        UPDATE,
        {
            "changes": [add("behavior_policy", "diet", "vegetarian")],
            "confirmedInConversation": True,
            "confirmationQuote": "My diet is vegetarian these days, remember that.",
        },
    )
    assert made["ok"] is True
    page = logged_in.get(reverse("admin:operator_site_instruction_change", args=[row.pk]))
    assert page.status_code == 200
    assert b'name="text"' not in page.content  # read-only once recorded


# --- the one-tap link from a notice -----------------------------------------------------------------------
def _link(notice: Notification) -> str:
    return revert_links.revert_url(notice).removeprefix("http://127.0.0.1:8000")


def test_the_one_tap_link_undoes_the_reported_version_once(client, owner, history) -> None:
    notice = Notification.objects.get(subject_id=2)
    anonymous = client.get(_link(notice))
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    client.login(username="owner", password="pw-owner-123")
    page = client.get(_link(notice))
    assert page.status_code == 200
    assert b"Undo version 2" in page.content
    assert _cell("del", b"Iain &lt;b&gt;bold&lt;/b&gt;") in page.content
    assert WorldModelVersion.objects.count() == 3  # GET changed nothing
    done = client.post(_link(notice))
    assert done.status_code == 302
    version = WorldModelVersion.objects.get(number=4)
    assert (version.operation, version.reverts_id, version.principal_id) == ("undo", 2, owner.principal.id)
    assert Belief.objects.get(key="name").value == "Ian"
    notice.refresh_from_db()
    assert notice.revert_used_by_id == owner.principal.id
    again = client.post(_link(notice))
    assert again.status_code == 410
    assert WorldModelVersion.objects.count() == 4


def test_a_link_that_would_discard_later_changes_is_refused_and_stays_usable(
    client, owner, agent, say, tool
) -> None:
    say("My name is Ian, that is all.")
    first = tool(
        agent.principal,
        UPDATE,
        {
            "changes": [add("identity", "name", "Ian")],
            "confirmedInConversation": True,
            "confirmationQuote": "My name is Ian, that is all.",
        },
    )
    say("Really, my name is Iain now.")
    tool(
        owner.principal,
        UPDATE,
        {
            "changes": [update("identity", "name", "Iain")],
            "confirmedInConversation": True,
            "confirmationQuote": "Really, my name is Iain now.",
        },
    )
    notice = Notification.objects.get(id=first["notification"])
    client.login(username="owner", password="pw-owner-123")
    page = client.get(_link(notice))
    assert b"version(s) 2" in page.content
    refused = client.post(_link(notice))
    assert refused.status_code == 409
    notice.refresh_from_db()
    assert notice.revert_used_at is None
    assert Belief.objects.get(key="name").value == "Iain"
    assert WorldModelVersion.objects.count() == 2
    assert services.REVERTER.describe_undo(1)["refusal"]["error"] == "revert_conflict"


def test_the_old_instruction_pages_lead_to_the_kernels(logged_in, say) -> None:
    """Instructions moved into the kernel (/admin/operator_site/instruction/): a bookmark of the
    old pages still lands on the new ones; nothing else under the old prefix is redirected."""
    row = say("Please call me Iain.")
    for old, new in [
        ("/admin/beliefs/instruction/", reverse("admin:operator_site_instruction_changelist")),
        ("/admin/beliefs/instruction/add/", reverse("admin:operator_site_instruction_add")),
        (
            f"/admin/beliefs/instruction/{row.pk}/change/",
            reverse("admin:operator_site_instruction_change", args=[row.pk]),
        ),
        (
            "/admin/beliefs/instruction/?q=Iain",
            reverse("admin:operator_site_instruction_changelist") + "?q=Iain",
        ),
    ]:
        response = logged_in.get(old)
        assert (response.status_code, response["Location"]) == (302, new)
        assert logged_in.get(new).status_code == 200
    assert logged_in.get("/admin/beliefs/instruction//evil.example/").status_code == 404
