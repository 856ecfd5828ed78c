"""The admin shows runs, days, progress and observations and changes none of them; stored text from
agents is rendered as text, never as markup."""

from __future__ import annotations

import pytest

from runs.lock import heartbeat, start_run
from runs.models import Observation, OperatorDay, ProgressEntry, Run
from runs.records import record_observation, record_progress

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('owned')</script>"
IMG = '<img src=x onerror="alert(1)">'


@pytest.fixture
def rows(agent) -> dict[str, object]:
    started = start_run(principal=agent.principal, kind="triage", note=SCRIPT)
    heartbeat(principal=agent.principal, run_id=started.run.id, token=started.token, progress=IMG)
    progress = record_progress(
        principal=agent.principal, summary=SCRIPT, outcome="failed", tried=[IMG], run_id=started.run.id
    )
    observation = record_observation(
        principal=agent.principal, kind="world", summary=SCRIPT, source=IMG, data={"html": IMG}
    )
    day = OperatorDay.objects.get()
    OperatorDay.objects.filter(pk=day.pk).update(summary={"note": SCRIPT})
    return {
        "run": Run.objects.get(pk=started.run.pk),
        "token": started.token,
        "day": day,
        "progressentry": progress,
        "observation": observation,
    }


@pytest.mark.parametrize("model", ["run", "operatorday", "progressentry", "observation"])
def test_pages_render_escaped_and_nothing_can_be_added_changed_or_deleted(admin_client, rows, model) -> None:
    obj = rows["day" if model == "operatorday" else model]
    base = f"/admin/runs/{model}/"
    listing = admin_client.get(base)
    page = admin_client.get(f"{base}{obj.pk}/change/")
    for response in (listing, page):
        assert response.status_code == 200
        html = response.content.decode()
        assert "<script>alert(" not in html
        assert "<img src=x" not in html
    assert "&lt;script&gt;" in page.content.decode()  # shown, as text

    assert admin_client.get(f"{base}add/").status_code == 403
    before = type(obj).objects.filter(pk=obj.pk).values().get()
    admin_client.post(f"{base}{obj.pk}/change/", {"summary": "edited", "status": "ok", "tainted": ""})
    assert admin_client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403
    assert type(obj).objects.filter(pk=obj.pk).values().get() == before


def test_the_run_page_never_shows_the_token_or_its_digest(admin_client, rows) -> None:
    run = rows["run"]
    html = admin_client.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    assert rows["token"] not in html
    assert run.token_digest not in html
    assert "triage" in html


def test_observations_show_as_tainted(admin_client, rows) -> None:
    html = admin_client.get("/admin/runs/observation/").content.decode()
    assert "icon-yes" in html  # the tainted column: always yes
    assert Observation.objects.filter(tainted=True).count() == Observation.objects.count() == 1
    assert ProgressEntry.objects.count() == 1
