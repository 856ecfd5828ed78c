"""The goals console through Django's test client: goal, priority and project pages with their
history, version pages with readable (escaped) diffs, "undo this change" and "revert to here" (login
required, GET changes nothing, POST acts once, conditionally, and records the human), the board with
its goal and project columns, and the decision log read-only."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from goals import services
from goals.models import DecisionLogEntry, Goal, GoalModelVersion, Project, Task
from goals.tests.helpers import RECONCILE, ranking
from operator_site.models import Notification


def _cell(tag: str, text: bytes) -> bytes:
    """A before/after cell as the diff renders it: agent text direction-isolated (operator_site.display)."""
    return f"<{tag}>".encode() + b'<bdi class="op-agent">' + text + f"</bdi></{tag}>".encode()


pytestmark = pytest.mark.django_db


@pytest.fixture
def history(owner, agent, add_goal, goal_change, tool):
    """v1 Run a marathon, v2 Write <b>a novel</b> (the person's), v3 the agent pauses the novel,
    v4 the agent adds a project for the marathon."""
    add_goal("Run a marathon")
    add_goal("Write <b>a novel</b>")
    paused = goal_change(agent, action="pause", goal="write <b>a novel</b>")
    assert paused["ok"] is True, paused
    made = tool(
        agent.principal,
        RECONCILE,
        {
            "changes": [
                {
                    "entity": "project",
                    "op": "add",
                    "fields": {"title": "Couch to 5k", "goal": "Run a marathon"},
                }
            ]
        },
    )
    assert made["version"] == 4
    services.update_task(
        principal=agent.principal,
        key="shoes",
        patch={"title": "Buy shoes", "lane": "health"},
        goal="Run a marathon",
    )
    return paused


@pytest.fixture
def logged_in(client, owner):
    client.login(username="owner", password="pw-owner-123")
    return client


def undo_url(number: int) -> str:
    return reverse("admin:goals_goalmodelversion_undo", args=[number])


def restore_url(number: int) -> str:
    return reverse("admin:goals_goalmodelversion_restore", args=[number])


def _expected(page) -> int:
    return int(re.search(rb'name="expected_version" value="(\d+)"', page.content).group(1))


def test_the_pages_need_a_staff_login(client, history) -> None:
    for url in (undo_url(3), restore_url(1), reverse("admin:goals_goal_changelist")):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert client.post(undo_url(3), {"expected_version": "4"}).status_code == 302
    assert GoalModelVersion.objects.count() == 4


def test_goal_priority_project_and_task_pages(logged_in, history) -> None:
    listing = logged_in.get(reverse("admin:goals_goal_changelist"))
    assert listing.status_code == 200
    assert b"Run a marathon" in listing.content
    assert b"Write &lt;b&gt;a novel&lt;/b&gt;" in listing.content and b"<b>a novel</b>" not in listing.content
    novel = Goal.objects.get(title__startswith="Write")
    page = logged_in.get(reverse("admin:goals_goal_change", args=[novel.pk]))
    assert page.status_code == 200
    assert _cell("del", b"active") in page.content and _cell("ins", b"paused") in page.content
    assert b'name="title"' not in page.content  # read-only
    project = Project.objects.get()
    assert logged_in.get(reverse("admin:goals_project_change", args=[project.pk])).status_code == 200
    assert logged_in.get(reverse("admin:goals_priority_changelist")).status_code == 200
    board = logged_in.get(reverse("admin:goals_task_changelist") + "?status__exact=todo")
    assert board.status_code == 200
    assert (
        reverse("admin:goals_goal_change", args=[Goal.objects.get(title="Run a marathon").pk]).encode()
        in board.content
    )
    assert logged_in.get(reverse("admin:goals_task_add")).status_code == 403
    assert logged_in.get(reverse("admin:goals_decisionlogentry_changelist")).status_code == 200


def test_version_pages_show_readable_diffs(logged_in, history) -> None:
    version = logged_in.get(reverse("admin:goals_goalmodelversion_change", args=[2]))
    assert version.status_code == 200
    assert undo_url(2).encode() in version.content and restore_url(2).encode() in version.content
    assert b"goal ranking" in version.content
    assert (
        _cell(
            "ins",
            # each title isolated as an identifier (operator_site.display.Named)
            '1. <bdi class="op-agent">Run a marathon</bdi> · '
            '2. <bdi class="op-agent">Write &lt;b&gt;a novel&lt;/b&gt;</bdi>'.encode(),
        )
        in version.content
    )
    paused = logged_in.get(reverse("admin:goals_goalmodelversion_change", args=[3]))
    assert _cell("del", b"active") in paused.content
    assert b"instruction <a" in paused.content  # the evidence it relied on
    assert logged_in.get(reverse("admin:goals_goalmodelversion_changelist")).status_code == 200


def test_undo_this_change_get_shows_post_acts_once_and_records_the_human(logged_in, owner, history) -> None:
    page = logged_in.get(undo_url(3))
    assert page.status_code == 200
    assert b"Undo this change" in page.content
    assert _cell("del", b"paused") in page.content and _cell("ins", b"active") in page.content
    assert GoalModelVersion.objects.count() == 4  # GET changed nothing
    done = logged_in.post(undo_url(3), {"expected_version": _expected(page)})
    assert done.status_code == 302
    assert done["Location"] == reverse("admin:goals_goalmodelversion_change", args=[5])
    version = GoalModelVersion.objects.get(number=5)
    assert (version.operation, version.reverts_id, version.principal_id) == ("undo", 3, owner.principal.id)
    assert Goal.objects.get(title__startswith="Write").status == "active"
    assert Notification.objects.filter(kind="goal_model_revert", subject_id=5).count() == 1
    again = logged_in.post(undo_url(3), {"expected_version": _expected(page)})
    assert again.status_code == 409
    assert GoalModelVersion.objects.count() == 5


def test_a_stale_page_is_refused_and_shows_the_current_diff(logged_in, agent, tool, history) -> None:
    page = logged_in.get(undo_url(4))
    tool(
        agent.principal,
        RECONCILE,
        {"changes": [{"entity": "project", "op": "add", "fields": {"title": "Other"}}]},
    )
    stale = logged_in.post(undo_url(4), {"expected_version": _expected(page)})
    assert stale.status_code == 409
    assert b"changed since this page was shown" in stale.content
    assert _expected(stale) == 5
    assert logged_in.post(undo_url(4), {}).status_code == 400
    assert GoalModelVersion.objects.count() == 5


def test_a_conflicting_undo_offers_no_button(logged_in, history) -> None:
    page = logged_in.get(undo_url(1))  # v2 re-ranked, v4 linked a project to it
    assert b"version(s) 2" in page.content
    assert b'name="expected_version"' not in page.content
    assert logged_in.post(undo_url(1), {"expected_version": "4"}).status_code == 409
    assert GoalModelVersion.objects.count() == 4


def test_revert_to_here_restores_the_whole_model(logged_in, history) -> None:
    page = logged_in.get(restore_url(1))
    assert b"Undoes the effect of version(s) 2, 3, 4" in page.content
    done = logged_in.post(restore_url(1), {"expected_version": _expected(page)})
    assert done.status_code == 302
    assert ranking() == ["Run a marathon"]
    assert Project.objects.count() == 0
    assert GoalModelVersion.objects.get(number=5).restores_to == 1
    # The task keeps its link to the marathon, which is still there.
    assert Task.objects.get().goal.title == "Run a marathon"
    assert logged_in.get(restore_url(0)).status_code == 200
    assert logged_in.get(restore_url(99)).status_code == 404


def test_a_staff_login_without_a_human_principal_may_look_but_not_act(
    client, django_user_model, history
) -> None:
    django_user_model.objects.create_user(
        "helper", password="pw-helper-123", is_staff=True, is_superuser=True
    )
    client.login(username="helper", password="pw-helper-123")
    page = client.get(undo_url(4))
    assert page.status_code == 200 and b"can look, but not revert" in page.content
    assert client.post(undo_url(4), {"expected_version": "4"}).status_code == 403
    assert GoalModelVersion.objects.count() == 4


def test_the_admin_actions_lead_to_the_confirmation_pages(logged_in, history) -> None:
    url = reverse("admin:goals_goalmodelversion_changelist")
    response = logged_in.post(url, {"action": "undo_selected", "_selected_action": ["3"]})
    assert response.status_code == 302 and response["Location"] == undo_url(3)
    response = logged_in.post(url, {"action": "revert_to_selected", "_selected_action": ["1"]})
    assert response["Location"] == restore_url(1)


def test_the_one_tap_link_from_a_goal_notice(client, owner, history) -> None:
    from operator_site import revert_links

    notice = Notification.objects.get(id=history["notification"])
    link = revert_links.revert_url(notice).removeprefix("http://127.0.0.1:8000")
    client.login(username="owner", password="pw-owner-123")
    page = client.get(link)
    assert page.status_code == 200 and b"Undo version 3" in page.content
    assert client.post(link).status_code == 302
    assert Goal.objects.get(title__startswith="Write").status == "active"
    assert client.post(link).status_code == 410


def test_the_decision_log_cannot_be_edited_from_the_admin(logged_in, owner) -> None:
    entry = services.log_decision(principal=owner.principal, title="t", decision="d", rationale="r")
    page = logged_in.get(reverse("admin:goals_decisionlogentry_change", args=[entry.pk]))
    assert page.status_code == 200 and b'name="decision"' not in page.content
    assert (
        logged_in.post(
            reverse("admin:goals_decisionlogentry_delete", args=[entry.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert DecisionLogEntry.objects.count() == 1
