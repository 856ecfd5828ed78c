"""The human console in a real browser: Debian's Chromium, headless, driven by Playwright (pointed at
/usr/bin/chromium; no browser download), against a live uvicorn server.

A staff human logs in, approves one intent (accept), edits and approves another, responds to a
third, parks a fourth, then opens a notice's one-tap revert link and reverts; each outcome is
checked in the database. The review pages are then walked at phone (390 px) and desktop width, and
their screenshots saved (under docs/screenshots/, shown in the README, with
OPERATOR_WRITE_SCREENSHOTS=1).

Without Chromium or Playwright these tests are skipped with that reason, except under
OPERATOR_REQUIRE_BROWSER=1 (CI, which installs Chromium), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction

from tests.fixtures import start_uvicorn, stop_uvicorn

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Screenshots go to the data folder on every run; OPERATOR_WRITE_SCREENSHOTS=1 refreshes the ones the
# README shows (docs/screenshots/), so an ordinary test run leaves the working tree clean.
_ROOT = Path(__file__).resolve().parent.parent.parent
SCREENSHOTS = (
    _ROOT / "docs" / "screenshots"
    if os.environ.get("OPERATOR_WRITE_SCREENSHOTS") == "1"
    else Path(os.environ.get("OPERATOR_DATA_DIR") or _ROOT / "var") / "screenshots"
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]

pytestmark = [pytest.mark.socket, pytest.mark.django_db(transaction=True)]


def _db(fn: Any) -> Any:
    """ORM work from the test while Playwright's sync API keeps an event loop in this thread."""
    from concurrent.futures import ThreadPoolExecutor

    def run() -> Any:
        try:
            return fn()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def _unavailable(reason: str) -> None:
    if os.environ.get("OPERATOR_REQUIRE_BROWSER") == "1":
        pytest.fail(f"a browser is required (OPERATOR_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(f"browser unavailable: {reason}")


@pytest.fixture
def browser_page() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        _unavailable("Debian's chromium is not installed (apt-get install chromium chromium-driver)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed")
    with sync_playwright() as p:
        # launch() gives each run a fresh, throw-away profile (a new user-data-dir).
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()


@pytest.fixture
def console(owner: Any, make_principal: Any) -> Iterator[dict[str, Any]]:
    """A live server whose notices link back to it, an owner to log in as, and an agent's work to review."""
    from beliefs import services as beliefs
    from intents.lifecycle import ActionInput, record_intent

    agent = make_principal("scout", kind="agent")
    with transaction.atomic():
        made = {}
        for name, action in {
            "accept": ActionInput(
                type="spend", title="Annual plan renewal", amount_cents=4900, recipient="Acme Tools"
            ),
            "edit": ActionInput(
                type="send_email",
                title="Reply to the landlord",
                recipient="landlord@example.com",
                body="Yes, Tuesday works.",
            ),
            "respond": ActionInput(type="publish", title="Post the trip photos", body="Album: Lisbon"),
            "ignore": ActionInput(type="spend", title="Upgrade cloud storage", amount_cents=999),
        }.items():
            made[name], _ = record_intent(principal=agent.principal, action=action)
        beliefs.record_instruction(
            principal=owner.principal, text="Please remember my name is Ian Example and that I go by Ian."
        )
        changed = beliefs.update_world_model(
            principal=agent.principal,
            changes=[{"op": "add", "kind": "identity", "key": "name", "value": "Ian Example"}],
            confirmed=True,
            quote="Please remember my name is Ian Example and that I go by Ian.",
        )
    server = start_uvicorn()
    try:
        yield {"url": server.url, "intents": made, "world_model": changed, "owner": owner}
    finally:
        stop_uvicorn(server)


def _login(page: Any, url: str) -> None:
    page.goto(f"{url}/admin/login/?next=/admin/")
    page.fill("#id_username", "owner")
    page.fill("#id_password", "pw-owner-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#operator-review")


def _decide(page: Any, url: str, intent_id: int, button: str, fill: dict[str, str] | None = None) -> None:
    page.goto(f"{url}/admin/intents/intent/{intent_id}/decide/")
    form = page.locator("form", has=page.locator(f"input[type=submit][value={button}]"))
    for selector, value in (fill or {}).items():
        form.locator(selector).fill(value)
    form.locator(f"input[type=submit][value={button}]").click()
    page.wait_for_load_state("load")


def test_a_person_reviews_approves_and_reverts_in_the_browser(
    console: dict[str, Any], browser_page: Any
) -> None:
    from beliefs.models import Belief
    from intents.models import Decision, Intent
    from operator_site.models import Notification
    from operator_site.revert_links import revert_url

    page, url, made = browser_page, console["url"], console["intents"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    _login(page, url)
    review = page.locator("#operator-review")
    assert re.search(r"Intents awaiting your approval\s*4", review.inner_text())
    assert "Annual plan renewal" in review.inner_text()
    assert re.search(r"High-stakes notices not yet acknowledged\s*1", review.inner_text())

    page.goto(f"{url}/admin/intents/intent/{made['accept'].pk}/decide/")
    shown = page.inner_text("#content-main")
    assert "$49.00" in shown or "49.00" in shown  # the amount as money
    assert "Spending money, paid subscriptions, purchases, and paid vendor commitments" in shown
    for button in ("Accept", "Edit", "Respond", "Ignore"):
        assert page.locator(f"input[type=submit][value={button}]").count() == 1

    _decide(page, url, made["accept"].pk, "Accept")
    _decide(page, url, made["edit"].pk, "Edit", {"#id_body": "Yes, Tuesday at 10 works."})
    _decide(page, url, made["respond"].pk, "Respond", {"#id_text": "Only the beach ones, please."})
    _decide(page, url, made["ignore"].pk, "Ignore")

    def outcomes() -> dict[str, Any]:
        rows = {name: Intent.objects.get(pk=intent.pk) for name, intent in made.items()}
        decisions = {
            name: Decision.objects.select_related("decided_by").get(intent=row) for name, row in rows.items()
        }
        return {"rows": rows, "decisions": decisions}

    seen = _db(outcomes)
    rows, decisions = seen["rows"], seen["decisions"]
    assert rows["accept"].status == "approved" and rows["accept"].approval_decision_id is not None
    assert rows["edit"].status == "approved" and rows["edit"].body == "Yes, Tuesday at 10 works."
    assert rows["edit"].idempotency_key != made["edit"].idempotency_key  # the edited payload's own key
    assert rows["respond"].status == "pending_approval"
    assert decisions["respond"].response == "Only the beach ones, please."
    assert rows["ignore"].status == "pending_approval"
    assert decisions["ignore"].status == "parked"
    assert {decisions[n].decided_by.name for n in ("accept", "edit")} == {"owner"}

    notice = _db(lambda: Notification.objects.get(safety=True, subject_kind="world_model"))
    from django.conf import settings

    link = url + _db(lambda: revert_url(notice)).removeprefix(settings.OPERATOR_PUBLIC_URL)
    page.goto(link)
    diff = page.inner_text("#content-main")
    assert "Ian Example" in diff
    page.click("input[type=submit][value='Revert this change']")
    page.wait_for_load_state("load")
    # undoing the add restores the pre-image: no such belief
    assert not _db(lambda: Belief.objects.filter(kind="identity", key="name", status="active").exists())
    assert _db(lambda: Notification.objects.get(pk=notice.pk).revert_used_by.name) == "owner"

    page.goto(link)  # the link works once
    assert "already been used" in page.inner_text("#content-main")


# --- what the person sees is what is approved ---------------------------------------------------------------
RECIPIENT = "DE89 3704 0044 0532 \u202e0130 00\u202c \u200bBob"
BODY = "Pay the invoice.\nrm -rf ~/\u2066backups\u2069 \u200d\u202e# just a comment\u202c\nThanks"

_CSP_WATCH = """() => {
  window.__csp = [];
  document.addEventListener(
    'securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
}"""

# The left edge of every character of an element's text, in logical order: laid out left to right
# (nothing reordered) means each starts at or right of the one before on its line.
_ORDER = """(root) => {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const lefts = [];
  let node;
  while ((node = walker.nextNode())) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rects = range.getClientRects();
      if (rects.length) lefts.push([rects[0].left, rects[0].top, node.data[i]]);
    }
  }
  let backwards = 0;
  for (let i = 1; i < lefts.length; i++) {
    if (Math.abs(lefts[i][1] - lefts[i - 1][1]) < 2 && lefts[i][0] + 0.5 < lefts[i - 1][0]) backwards++;
  }
  return backwards;
}"""


def test_the_approval_page_shows_hidden_characters_and_nothing_is_reordered(
    owner: Any, make_principal: Any, browser_page: Any
) -> None:
    """An intent whose recipient and body hold bidi overrides, isolates and zero-width characters
    (stored past the door, as a row written before the rule would be): the approval page shows each
    as a marked token, in the order stored, says so at the top, and runs under the CSP."""
    from intents.lifecycle import ActionInput, record_intent

    def make() -> Any:
        agent = make_principal("scout", kind="agent")
        with transaction.atomic():
            intent, _ = record_intent(
                principal=agent.principal,
                action=ActionInput(
                    type="spend",
                    title="Pay the \u202eeciovni\u202c",
                    recipient=RECIPIENT,
                    amount_cents=120000,
                    body=BODY,
                ),
            )
        return intent

    intent = _db(make)  # Playwright's sync API keeps an event loop in this thread
    server = start_uvicorn()
    page = browser_page
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        page.add_init_script(f"({_CSP_WATCH})()")
        _login(page, server.url)
        page.goto(f"{server.url}/admin/intents/intent/{intent.pk}/decide/")
        banner = page.inner_text("#op-hidden-banner")
        assert "U+202E RIGHT-TO-LEFT OVERRIDE" in banner and "U+200B ZERO WIDTH SPACE" in banner
        recipient_cell = page.locator("tr", has=page.locator("th", has_text="recipient")).locator("td")
        shown = recipient_cell.inner_text()
        assert shown == "DE89 3704 0044 0532 [U+202E]0130 00[U+202C] [U+200B]Bob", shown
        body_cell = page.locator("tr", has=page.locator("th", has_text="body")).locator("td")
        assert "[U+2066]backups[U+2069] [U+200D][U+202E]# just a comment[U+202C]" in body_cell.inner_text()
        for name, element in (
            ("title", page.locator("#content-main h2").first),
            ("recipient", recipient_cell),
            ("body", body_cell),
        ):
            assert element.evaluate(_ORDER) == 0, f"the {name} is laid out out of order"
        # The tokens are marked (a styled element), not just text.
        assert page.locator("td .op-hidden").count() >= 7
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "approval-flagged.png"), full_page=True)
        # The control: the same text put on a page as it is IS reordered — so the check above can fail.
        page.goto(f"{server.url}/admin/")
        page.evaluate(
            "(t) => { const p = document.createElement('p'); p.id = 'raw'; p.textContent = t;"
            " document.body.prepend(p); }",
            RECIPIENT,
        )
        assert page.locator("#raw").evaluate(_ORDER) > 0
        # The console works under the Content-Security-Policy: pages, the changelist's script, no violation.
        for path in (
            "/admin/",
            "/admin/intents/intent/",
            f"/admin/intents/intent/{intent.pk}/change/",
            "/admin/beliefs/belief/",
            "/admin/operator_site/notification/",
            "/api/docs",
        ):
            page.goto(f"{server.url}{path}")
            assert page.evaluate("window.__csp") == [], (path, page.evaluate("window.__csp"))
        page.goto(f"{server.url}/admin/operator_site/notification/")
        page.locator("input.action-select").first.check()
        assert "1 of" in page.inner_text(".action-counter")  # the admin's own actions.js runs
        assert violations == []
    finally:
        stop_uvicorn(server)


# --- a proposal, approved from its diff page -------------------------------------------------------------
@pytest.mark.parametrize(("width", "name"), [(1280, "desktop"), (390, "phone")])
def test_the_person_accepts_a_proposal_from_its_diff_page(
    owner: Any, make_principal: Any, browser_page: Any, width: int, name: str
) -> None:
    """An agent proposes a world-model change (the person's words were a hedge); the person opens the
    approval page — at desktop and at phone width — sees before → after, and accepts in one tap. The
    belief then holds the value, with the approval as its evidence."""
    from beliefs.models import Belief
    from intents.lifecycle import ActionInput, record_intent

    def make() -> Any:
        agent = make_principal("scout", kind="agent")
        from beliefs import services as beliefs

        with transaction.atomic():
            beliefs.record_instruction(principal=owner.principal, text="My home city is Porto.")
            beliefs.update_world_model(
                principal=owner.principal,
                changes=[{"op": "add", "kind": "identity", "key": "home_city", "value": "Porto"}],
                confirmed=True,
                quote="My home city is Porto.",
            )
            intent, _ = record_intent(
                principal=agent.principal,
                action=ActionInput(
                    type="world_model_change",
                    title="Home city: Lisbon",
                    changes=[{"op": "update", "kind": "identity", "key": "home_city", "value": "Lisbon"}],
                    reason="You said on a call that you moved; I could not quote it.",
                ),
            )
        return intent

    intent = _db(make)
    server = start_uvicorn()
    page = browser_page
    try:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{server.url}/admin/login/?next=/admin/")
        page.fill("#id_username", "owner")
        page.fill("#id_password", "pw-owner-123")
        page.click("input[type=submit]")
        page.wait_for_load_state("load")
        page.goto(f"{server.url}/admin/intents/intent/{intent.pk}/decide/")
        diff = page.locator("table.op-diff")
        assert "Porto" in diff.locator("del").first.inner_text()
        assert "Lisbon" in diff.locator("ins").first.inner_text()
        assert "I could not quote it" in page.inner_text("#content-main")
        # One tap: the Accept button is on the page, inside the viewport's width.
        accept = page.locator("input[type=submit][value=Accept]")
        box = accept.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width + 1
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"proposal-{name}.png"), full_page=True)
        accept.click()
        page.wait_for_load_state("load")
        belief = _db(lambda: Belief.objects.get(kind="identity", key="home_city"))
        assert (belief.value, belief.evidence_approval is not None) == ("Lisbon", True)
    finally:
        stop_uvicorn(server)


# --- the review pages on a phone and a desktop -----------------------------------------------------------
# Every text of the page's content laid out in about as many lines as it has words, or fewer: a label
# squeezed into a column one letter wide (the bug this guards) takes a line per letter.
_SQUEEZED = """() => {
  const root = document.querySelector('#content') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const bad = [];
  let node;
  while ((node = walker.nextNode())) {
    const text = node.data.trim();
    if (text.replace(/\\s/g, '').length < 6) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
    const tops = new Set(rects.map(r => Math.round(r.top)));
    const words = text.split(/\\s+/).length;
    if (tops.size > words + 2) bad.push(text.slice(0, 40) + ` (${tops.size} lines, ${words} words)`);
  }
  return bad;
}"""
_OVERFLOW = "() => document.documentElement.scrollWidth"


def _fits(page: Any, width: int, what: str) -> None:
    assert page.evaluate(_SQUEEZED) == [], f"{what}: text squeezed one letter per line at {width} px"
    assert page.evaluate(_OVERFLOW) <= width + 1, f"{what}: wider than the {width} px screen"


def _inside(page: Any, selector: str, width: int) -> Any:
    element = page.locator(selector)
    box = element.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (selector, box)
    return element


@pytest.mark.parametrize(("width", "name"), [(1280, "desktop"), (390, "phone")])
def test_the_review_pages_fit_a_phone_and_a_desktop(
    owner: Any, make_principal: Any, browser_page: Any, width: int, name: str
) -> None:
    """The person's review flow at phone and desktop width: `/` lands on the dashboard, which shows what
    the gate blocked and the safety notice that could not be delivered; the approval page says what
    Accept leads to; a notice's page shows what changed, who changed it and the evidence, with Undo and
    Looks right one click each; the person's own undo is acknowledged by the undo. No page is wider
    than the screen and no label is squeezed one letter per line. Screenshots of each page."""
    from datetime import timedelta

    from django.utils import timezone

    from beliefs import services as beliefs
    from beliefs.models import Belief
    from intents import lifecycle as intents
    from operator_site.models import Notification

    def make() -> dict[str, Any]:
        agent = make_principal("scout", kind="agent")
        with transaction.atomic():
            beliefs.record_instruction(
                principal=owner.principal, text="Please remember my name is Ian Example and that I go by Ian."
            )
            beliefs.update_world_model(
                principal=agent.principal,
                changes=[{"op": "add", "kind": "identity", "key": "name", "value": "Ian Example"}],
                confirmed=True,
                quote="Please remember my name is Ian Example and that I go by Ian.",
            )
            pending, _ = intents.record_intent(
                principal=agent.principal,
                action=intents.ActionInput(
                    type="send_email",
                    title="Reply to the landlord about the boiler repair visit",
                    recipient="landlord@example.com",
                    body="Yes, Tuesday works.",
                ),
            )
            intents.record_intent(
                principal=agent.principal,
                action=intents.ActionInput(
                    type="share_credentials", title="Send the wifi password", recipient="guest@example.com"
                ),
            )
        # A safety notice every channel refused (made directly: no deliverer is woken for it).
        Notification.objects.create(
            kind="test_alarm",
            title="A safety notice nobody received",
            safety=True,
            state=Notification.State.FAILED,
            last_error="the mail server refused the recipient",
            created_at=timezone.now() - timedelta(hours=1),
        )
        notice = Notification.objects.get(safety=True, subject_kind="world_model")
        return {"pending": pending, "notice": notice}

    made = _db(make)
    server = start_uvicorn()
    page, url = browser_page, server.url
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{url}/")  # the bare address: to the login, then the dashboard
        page.fill("#id_username", "owner")
        page.fill("#id_password", "pw-owner-123")
        page.click("input[type=submit]")
        page.wait_for_selector("#operator-review")
        assert page.url.rstrip("/").endswith("/admin")
        assert "share_credentials" in page.inner_text("#review-blocked")
        assert "Send the wifi password" in page.inner_text("#review-blocked")
        assert re.search(r"Safety notices not delivered\s*1", page.inner_text("#review-undelivered"))
        page.screenshot(path=str(SCREENSHOTS / f"dashboard-{name}.png"), full_page=True)
        _fits(page, width, "dashboard")

        page.goto(f"{url}/admin/intents/intent/{made['pending'].pk}/decide/")
        follow = page.inner_text("#follow-through")
        assert "Nothing will carry this out" in follow and "send_email" in follow
        _inside(page, "input[type=submit][value=Accept]", width)
        page.screenshot(path=str(SCREENSHOTS / f"approval-{name}.png"), full_page=True)
        _fits(page, width, "approval page")

        notice = made["notice"]
        page.goto(f"{url}/admin/operator_site/notification/{notice.pk}/change/")
        assert "Ian Example" in page.inner_text("#notice-changes")
        assert "scout" in page.inner_text("#notice-who")
        assert "Please remember my name is Ian Example" in page.inner_text("#notice-evidence")
        _inside(page, "input[type=submit][value=Undo]", width)
        _inside(page, "input[type=submit][value='Looks right']", width)
        page.screenshot(path=str(SCREENSHOTS / f"notice-{name}.png"), full_page=True)
        _fits(page, width, "notice page")

        see_first = page.locator("#notice-actions a").first.get_attribute("href")  # what Undo would change
        page.goto(url + see_first)
        assert "Ian Example" in page.inner_text("#content-main")
        page.screenshot(path=str(SCREENSHOTS / f"revert-{name}.png"), full_page=True)
        _fits(page, width, "revert page")

        # Looks right: one click, then back on the dashboard with nothing left to acknowledge there.
        page.goto(f"{url}/admin/operator_site/notification/{notice.pk}/change/")
        page.click("input[type=submit][value='Looks right']")
        page.wait_for_selector("#operator-review")
        assert _db(lambda: Notification.objects.get(pk=notice.pk).acknowledged_by.name) == "owner"
        # Undo: one click from the same page; the person's own undo makes a notice already acknowledged.
        page.goto(f"{url}/admin/operator_site/notification/{notice.pk}/change/")
        page.click("input[type=submit][value=Undo]")
        page.wait_for_load_state("load")
        assert "Undone by owner" in page.inner_text("#notice-actions")
        assert not _db(lambda: Belief.objects.filter(kind="identity", key="name", status="active").exists())
        own = _db(
            lambda: Notification.objects.select_related("acknowledged_by").get(kind="world_model_revert")
        )
        assert own.acknowledged_by is not None and own.acknowledged_by.name == "owner"
    finally:
        stop_uvicorn(server)
