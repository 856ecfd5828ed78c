# ruff: noqa: E501  (the case tables read best one case per line)
"""Check 26 — no input that stops the machine: agent text that makes a check's work grow faster
than the text.

An attacker's probe (2026-12-07, sixteenth sitting) timed every function that reads agent text at the
longest the door admits, for 540 shapes (each credential word, marker, script, mark and separator,
repeated with each separator). Two classes grew faster than the text:

- the gate's "password stated in words" pattern looked for a digit to the end of a text with no space
  in it, from every place the words matched: an email body of "密码是" 6,000 times (20,000 characters)
  took 2.3 s of CPU to judge, "pw=" repeated 2.2 s (quadratic: four times the text, sixteen times the
  work);
- the evidence rules read a quoted sentence's context (a block of run-on lines is one sentence to
  them) once per hedge, condition and report phrase, 130 passes, and cut every instruction of the
  window into sentences up to 5,000,000 characters even after one authorised the change: a quote
  from a long instruction cost 2 s, and half a minute at the bound.

What is checked here:

- the gate on each shape at 5,000 and 20,000 characters (body and a title-length text): the CPU time
  grows at most twice as fast as the text (best of three, so a busy machine does not decide it). A
  linear check grows 4x, the old quadratic ones 14-16x;
- the evidence lookup stops at the first instruction that authorises the change (the older ones are
  never cut into sentences), reads at most its budget of characters when none does, and reads a
  quoted line's context once per phrase list, not once per phrase.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import transaction

from intents.gate import Action, evaluate
from operator_site import evidence, wording
from tests.security.helpers import Tally, run_tool

SMALL, LARGE = 5_000, 20_000
# Growth allowed for 4x the text: linear work grows 4x; 8x leaves room for a noisy machine, and a
# quadratic check (16x) stays well above it.
MAX_GROWTH = 8.0

# (shape, the unit repeated). Credential words written without spaces (Chinese, Japanese, Korean),
# short forms and words before a separator, and the families the probe found slow or near it.
SHAPES: list[tuple[str, str]] = [
    ("Chinese password is", "密码是"),
    ("Chinese (traditional) password is", "密碼是"),
    ("Japanese password is", "パスワードは"),
    ("Korean password is", "비밀번호는"),
    ("Korean password with another particle", "비밀번호是"),
    ("Chinese password colon", "密码\uff1a"),
    ("pw equals", "pw="),
    ("pw colon", "pw:"),
    ("pwd colon", "pwd:"),
    ("mdp colon", "mdp:"),
    ("password colon", "password:"),
    ("password is, no space after", "password is\u00a0"),
    ("PIN is", "PIN is"),
    ("code is digits", "code is 1"),
    ("spelled-out letters", "p "),
    ("digits and spaces", "1 "),
    ("quotes", "password is '"),
    ("BEGIN blocks", "-----BEGIN "),
    ("token prefixes", "sk-"),
    ("AWS prefix", "AKIA"),
    ("GitHub prefix", "ghp_"),
    ("zero-width joined", "p\u200b"),
    ("combining marks", "a\u0301"),
    ("struck-through letters", "p\u0336"),
    ("small capitals", "\u1d18"),
    ("Cyrillic word", "пароль "),
    ("one long word", "a"),
]


def _cpu_ms(action: Action) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        evaluate(action)
        best = min(best, time.process_time() - start)
    return best * 1000


def _text(unit: str, length: int) -> str:
    return (unit * (length // len(unit) + 1))[:length]


def test_the_gates_work_grows_with_the_text_not_faster(scorecard) -> None:
    evaluate(Action(type="email", title="warm", recipient="bob@example.com", body="é ᴘ"))  # first-use tables
    grew: list[str] = []
    cases = 0
    for shape, unit in SHAPES:
        for where in ("body", "title"):
            cases += 1
            small, large = (SMALL, LARGE) if where == "body" else (75, 300)

            def action(length: int, where: str = where, unit: str = unit) -> Action:
                text = _text(unit, length)
                if where == "body":
                    return Action(type="email", title="t", recipient="bob@example.com", body=text)
                return Action(type="email", title=text, recipient="bob@example.com")

            at_small, at_large = _cpu_ms(action(small)), _cpu_ms(action(large))
            growth = at_large / max(at_small, 0.05)
            if growth > MAX_GROWTH and at_large > 5:  # under 5 ms the timer's grain decides
                grew.append(f"{shape} in the {where}: {at_small:.1f} -> {at_large:.1f} ms (x{growth:.1f})")
    scorecard(
        26,
        f"the gate: {len(SHAPES)} shapes x body (5,000 -> 20,000 characters) and title (75 -> 300) → CPU grows at most x{MAX_GROWTH:g} for x4 the text",
        cases=cases,
        bypasses=len(grew),
        grew=grew,
    )
    assert grew == []


# --- the evidence lookup ------------------------------------------------------------------------------
SENTENCE = "My employer is Initech."
CHANGE = [{"op": "add", "kind": "identity", "key": "employer", "value": "Initech"}]


def _record(owner: Any, text: str) -> None:
    with transaction.atomic():
        run_tool(owner, "operator_record_instruction", {"text": text})


def _write(agent: Any, quote: str) -> dict[str, Any]:
    with transaction.atomic():
        return run_tool(
            agent,
            "operator_update_world_model",
            {"changes": CHANGE, "confirmedInConversation": True, "confirmationQuote": quote},
        )


@pytest.fixture
def cut(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text the evidence rules cut into sentences."""
    lengths: list[int] = []
    split = wording.split_sentences

    def counting(text: str) -> list[wording.Sentence]:
        lengths.append(len(text))
        return split(text)

    monkeypatch.setattr(wording, "split_sentences", counting)
    return lengths


@pytest.mark.django_db(transaction=True)
def test_the_evidence_lookup_stops_at_the_first_authorising_row_and_within_its_budget(
    principals, scorecard, no_rate_limit, cut
) -> None:
    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    tally = Tally()
    unit = "The weather was fine and we talked about Initech for a while. "
    filler = unit * (19_900 // len(unit))  # whole sentences
    rows = 30
    for _ in range(rows):
        _record(owner, f"{filler} {SENTENCE}")
    # The newest row authorises: no older row is cut into sentences.
    cut.clear()
    answer = _write(agent, SENTENCE)
    tally.expect("the newest row authorises", answer.get("ok") is True, answer)
    tally.expect("only the newest row was cut into sentences", len(cut) == 1, cut)
    # The sentence is spent in every row now, so no row authorises: the lookup reads newest first
    # until its budget is spent, then refuses.
    with transaction.atomic():
        reverted = run_tool(agent, "operator_revert_world_model", {})
    assert reverted.get("ok") is True, (answer, reverted)
    for _ in range(rows):  # spend the sentence in each row: each write uses the newest unspent one
        answer = _write(agent, SENTENCE)
        if answer.get("ok") is not True:
            break
        with transaction.atomic():
            run_tool(agent, "operator_revert_world_model", {})
    cut.clear()
    answer = _write(agent, SENTENCE)
    tally.expect(
        "no row left to authorise",
        answer.get("error") in ("confirmation_reused", "confirmation_not_found"),
        answer,
    )
    read = sum(cut)
    tally.expect(
        f"at most {evidence._SCAN_CHARS:,} characters cut (read {read:,} in {len(cut)} rows)",
        read <= evidence._SCAN_CHARS and len(cut) < rows,
        cut[:5],
    )
    tally.record(
        scorecard,
        26,
        f"the evidence lookup: {rows} instructions of 20,000 characters holding the quote → the newest authorising one alone is cut into sentences; with none left, at most {evidence._SCAN_CHARS:,} characters",
    )


@pytest.mark.django_db(transaction=True)
def test_a_quoted_lines_context_is_read_once_per_phrase_list(
    principals, scorecard, no_rate_limit, monkeypatch
) -> None:
    """A quoted line at the end of 5,000 run-on lines (no sentence mark: one sentence to the rules)
    is refused or allowed on its context; the hedge, condition and report phrases are looked for in
    that context in one pass per list, not once per phrase (130 passes over 5,000 lines)."""
    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    _record(owner, "ok\n" * 5_000 + SENTENCE)
    searches = [0]
    find = wording.find_phrase

    def counting(haystack: tuple[str, ...], phrase: tuple[str, ...]) -> list[int]:
        searches[0] += 1
        return find(haystack, phrase)

    monkeypatch.setattr(wording, "find_phrase", counting)
    answer = _write(agent, SENTENCE)
    lines = 5_001
    ok = answer.get("error") != "internal_error" and searches[0] < lines
    scorecard(
        26,
        "the evidence rules on a line quoted after 5,000 run-on lines → one pass per phrase list over its context",
        cases=1,
        bypasses=0 if ok else 1,
        searches=searches[0],
        answer=str(answer)[:200],
    )
    assert ok, (searches[0], answer)


# --- "did you mean": the candidates of a missing name -------------------------------------------------
def _ab(rng: Any, length: int) -> str:
    """A name of `length` letters "a" and "b": the repetitive text on which difflib's ratio, which
    the candidates used before, is quadratic."""
    return "".join(rng.choice("ab") for _ in range(length))


def _refusal_cpu_ms(call: Any) -> tuple[float, dict[str, Any]]:
    best, answer = float("inf"), {}
    for _ in range(3):
        start = time.process_time()
        answer = call()
        best = min(best, time.process_time() - start)
    return best * 1000, answer


@pytest.mark.django_db(transaction=True)
def test_the_candidates_of_a_missing_name_cost_what_the_names_are_long(
    principals, scorecard, no_rate_limit
) -> None:
    """200 names of each length, then a name that is not there: the refusal lists the closest
    (`wording.close_matches`); its cost grows with the names' length, not with its square."""
    import random

    agent = principals["full_agent"].principal
    rng = random.Random(26)
    tally = Tally()
    costs: dict[str, list[float]] = {"belief key": [], "project title": []}
    for kind, length in (("note", 30), ("risk", 120)):
        keys = [_ab(rng, length) for _ in range(200)]
        for at in range(0, len(keys), 50):
            adds = [{"op": "add", "kind": kind, "key": k, "value": "v"} for k in keys[at : at + 50]]
            with transaction.atomic():
                assert run_tool(agent, "operator_update_world_model", {"changes": adds}).get("ok") is True
        missing = {"changes": [{"op": "update", "kind": kind, "key": _ab(rng, length), "value": "w"}]}

        def refused(missing: dict[str, Any] = missing) -> dict[str, Any]:
            with transaction.atomic():
                return run_tool(agent, "operator_update_world_model", missing)

        ms, answer = _refusal_cpu_ms(refused)
        tally.expect(
            f"belief key of {length}: refused with candidates",
            answer.get("error") == "belief_not_found" and len(answer.get("candidates", [])) > 0,
            answer,
        )
        costs["belief key"].append(ms)
    for length in (45, 180):  # under 200: difflib junks nothing
        titles = [_ab(rng, length) for _ in range(200)]
        for at in range(0, len(titles), 50):
            adds = [{"entity": "project", "op": "add", "fields": {"title": t}} for t in titles[at : at + 50]]
            with transaction.atomic():
                assert run_tool(agent, "operator_reconcile_goal_model", {"changes": adds}).get("ok") is True
        change = {"entity": "project", "op": "update", "target": _ab(rng, length), "fields": {"detail": "d"}}

        def refused_title(change: dict[str, Any] = change) -> dict[str, Any]:
            with transaction.atomic():
                return run_tool(agent, "operator_reconcile_goal_model", {"changes": [change]})

        ms, answer = _refusal_cpu_ms(refused_title)
        tally.expect(f"project title of {length}: refused", answer.get("ok") is False, answer)
        costs["project title"].append(ms)
    for name, (short, long) in costs.items():
        growth = long / max(short, 0.05)
        tally.expect(
            f"{name}: {short:.1f} -> {long:.1f} ms (x{growth:.1f}) for names x4 as long",
            growth <= MAX_GROWTH or long < 20,
            costs,
        )
    tally.record(
        scorecard,
        26,
        "did you mean: a missing belief key among 200 keys, a missing project title among 200 titles, each of repetitive letters → refused with candidates; CPU grows at most x8 for names x4 as long",
        costs={k: [round(v, 1) for v in vs] for k, vs in costs.items()},
    )


# --- directives in force: a notice is matched against all of them in one search -------------------------
@pytest.mark.django_db(transaction=True)
def test_many_directives_in_force_do_not_stop_notice_delivery(principals, scorecard, settings) -> None:
    """1,000 topic mutes in force (an agent may set them: each call is one directive) and 200 held
    notices: the pass that releases what no directive holds any more read the directives once per
    notice and matched each notice against each mute in turn: 31 s of CPU. Now it reads them once
    per pass and matches a notice against all of them in one search. Measured against the same pass
    with no directive in force, in the same run; and the directives are still obeyed."""
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from intents.models import Directive
    from operator_site import notifications
    from operator_site.models import Notification

    settings.OPERATOR_DELIVERY = "off"
    agent = principals["full_agent"].principal
    tally = Tally()
    for n in range(200):
        notifications.notify(kind="info", title=f"Notice {n} about the weekly report", topic=f"subject {n}")

    def pass_cpu_ms() -> tuple[float, list[int], int]:
        best, released, reads = float("inf"), [], 0
        for _ in range(2):
            Notification.objects.update(state="held", held_reason="test")
            with CaptureQueriesContext(transaction.get_connection()) as seen:
                start = time.process_time()
                released = notifications.release_held()
                best = min(best, time.process_time() - start)
            reads = sum('FROM "intents_directive"' in q["sql"] for q in seen.captured_queries)
        return best * 1000, released, reads

    anchor, released, _ = pass_cpu_ms()
    tally.expect("no directive: all 200 released", len(released) == 200, len(released))
    now = timezone.now()
    topics = [f"topic {n} of the quarterly plan" for n in range(999)] + ["notice 7 about"]
    Directive.objects.bulk_create(
        Directive(
            kind="topic_mute", topic=t, set_by=agent, actor=agent.name, created_at=now,
            expires_at=now + timezone.timedelta(hours=2),
        )
        for t in topics
    )  # fmt: skip
    cost, released, reads = pass_cpu_ms()
    tally.expect("the mute of 'notice 7 about' still holds its notice", len(released) == 199, len(released))
    tally.expect(f"the directives read once per pass ({reads})", reads == 1, reads)
    tally.expect(
        f"1,000 mutes: {cost:.0f} ms of CPU against {anchor:.0f} ms with none (at most x10)",
        cost <= 10 * max(anchor, 5.0),
        (cost, anchor),
    )
    tally.record(
        scorecard,
        26,
        "1,000 topic mutes in force, a release pass over 200 held notices → directives read once, CPU at most x10 the pass with none, the mutes obeyed",
    )


@pytest.mark.django_db(transaction=True)
def test_many_targets_not_found_among_many_items_cost_little_more_than_found_ones(
    principals, scorecard, no_rate_limit
) -> None:
    """2,000 projects (an agent adds them freely), then one reconcile naming 50 titles: found, then
    not found. Each target not found folded every title, and listed "did you mean" from all of
    them: 6-10 s of CPU for one call. Now the titles are read once per call, and likeness is
    searched for the first 5 targets not found (the rest list the titles holding theirs). Measured
    against the same call naming 50 titles that are there, in the same run; the refusal still names
    each target and lists candidates for the first ones."""
    import random

    agent = principals["full_agent"].principal
    rng = random.Random(7)
    words = ("plan", "garden", "house", "write", "novel", "trip", "paint", "shed", "run", "learn")
    titles = list(dict.fromkeys(" ".join(rng.choice(words) for _ in range(5)) + f" {n}" for n in range(2000)))
    for at in range(0, len(titles), 50):
        adds = [{"entity": "project", "op": "add", "fields": {"title": t}} for t in titles[at : at + 50]]
        with transaction.atomic():
            assert run_tool(agent, "operator_reconcile_goal_model", {"changes": adds}).get("ok") is True

    def call(targets: list[str]) -> tuple[float, dict[str, Any]]:
        changes = [
            {"entity": "project", "op": "update", "target": t, "fields": {"detail": "d"}} for t in targets
        ]
        best, answer = float("inf"), {}
        for _ in range(2):
            start = time.process_time()
            with transaction.atomic():
                answer = run_tool(agent, "operator_reconcile_goal_model", {"changes": changes})
                transaction.set_rollback(True)  # the same call again finds the same state
            best = min(best, time.process_time() - start)
        return best * 1000, answer

    found_ms, found = call(titles[:50])
    missing = [f"{t} again" for t in titles[100:150]]
    missing_ms, refused = call(missing)
    tally = Tally()
    tally.expect("50 found: written", found.get("ok") is True, found)
    resolution = refused.get("resolution", [])
    tally.expect(
        "50 not found: refused, each named",
        refused.get("error") == "target_not_found"
        and [r.get("outcome") for r in resolution] == ["missing"] * 50,
        str(refused)[:300],
    )
    tally.expect(
        "the first target not found lists the title it is like",
        bool(resolution) and titles[100] in [c.get("title") for c in resolution[0].get("candidates", [])],
        resolution[:1],
    )
    tally.expect(
        f"50 not found: {missing_ms:.0f} ms of CPU against {found_ms:.0f} ms for 50 found (at most x5)",
        missing_ms <= 5 * max(found_ms, 20.0),
        (missing_ms, found_ms),
    )
    tally.record(
        scorecard,
        26,
        "one reconcile naming 50 titles among 2,000 projects: not found costs at most x5 found (6-10 s before), each still named with candidates",
    )
