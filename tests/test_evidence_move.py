"""The evidence rows moved from beliefs into the kernel without moving a byte: a database migrated
to the heads before the move, holding instructions, spent sentences and the rows that cite them,
migrates forward with every row, every foreign key and the one-sentence-once constraint intact,
and with the admin permissions granted on `beliefs.Instruction` now on the kernel's model (the
content types are renamed, not recreated). Runs on SQLite and on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [
    ("operator_site", "0007_principal_evidence_since"),
    ("beliefs", "0004_evidence_approval"),
    ("goals", "0004_evidence_approval"),
]
MOVED = ("instruction", "confirmationuse")

pytestmark = pytest.mark.django_db(transaction=True)


def _migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _heads() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _before_the_move(old) -> dict[str, int]:
    """What an operator at the old heads holds: an instruction of the person's with a spent
    sentence, a belief, a world-model version and a goal citing it, and a staff user whose group may
    add instructions (`beliefs.add_instruction`)."""
    ContentType = old.get_model("contenttypes", "ContentType")
    Permission = old.get_model("auth", "Permission")
    Group = old.get_model("auth", "Group")
    User = old.get_model("auth", "User")
    # As an old database has them: the content types under beliefs, none under the kernel.
    ContentType.objects.filter(app_label="operator_site", model__in=MOVED).delete()
    instruction_type, _ = ContentType.objects.get_or_create(app_label="beliefs", model="instruction")
    ContentType.objects.get_or_create(app_label="beliefs", model="confirmationuse")
    add, _ = Permission.objects.get_or_create(
        content_type=instruction_type, codename="add_instruction", defaults={"name": "Can add instruction"}
    )
    group = Group.objects.create(name="people who may speak")
    group.permissions.add(add)
    user = User.objects.create(username="ian", is_staff=True)
    user.groups.add(group)

    Principal = old.get_model("operator_site", "Principal")
    person = Principal.objects.create(name="ian-person", kind="human", token_digest="d" * 64)
    now = timezone.now()
    said = old.get_model("beliefs", "Instruction").objects.create(
        text="My home city is Porto. Please call me Iain.",
        principal=person,
        actor=person.name,
        human_authored=True,
        created_at=now,
    )
    old.get_model("beliefs", "ConfirmationUse").objects.create(
        instruction=said, sentence=0, scope="world_model", subject="identity/home_city", version=1, span="x"
    )
    version = old.get_model("beliefs", "WorldModelVersion").objects.create(
        number=1,
        supersedes=0,
        operation="change",
        summary="s",
        principal=person,
        actor=person.name,
        evidence_instruction=said,
    )
    belief = old.get_model("beliefs", "Belief").objects.create(
        kind="identity",
        key="home_city",
        value="Porto",
        source_principal=person,
        source_name=person.name,
        source_kind="human",
        set_in_version=1,
        last_version=1,
        evidence_instruction=said,
        evidence_span="My home city is Porto.",
    )
    goal = old.get_model("goals", "Goal").objects.create(
        title="Run a marathon",
        importance=1,
        source_principal=person,
        source_name=person.name,
        source_kind="human",
        set_in_version=1,
        last_version=1,
        evidence_instruction=said,
    )
    return {
        "instruction": said.pk,
        "version": version.pk,
        "belief": belief.pk,
        "goal": goal.pk,
        "user": user.pk,
    }


def test_the_evidence_rows_survive_the_move_into_the_kernel() -> None:
    heads = _heads()
    moved_apps = {app for app, _ in BEFORE}
    before = BEFORE + [(app, name) for app, name in heads if app not in moved_apps]
    try:
        ids = _before_the_move(_migrate(before))
        new = _migrate(heads)
    finally:
        ContentType.objects.clear_cache()

    Instruction = new.get_model("operator_site", "Instruction")
    ConfirmationUse = new.get_model("operator_site", "ConfirmationUse")
    assert Instruction._meta.db_table == "beliefs_instruction"
    said = Instruction.objects.get(pk=ids["instruction"])
    assert said.text.startswith("My home city is Porto.") and said.human_authored
    assert list(ConfirmationUse.objects.values_list("instruction_id", "sentence")) == [(said.pk, 0)]
    # Every foreign key that cited it still does, through the kernel's model.
    belief = new.get_model("beliefs", "Belief").objects.select_related("evidence_instruction").get()
    assert belief.evidence_instruction == said
    assert new.get_model("beliefs", "WorldModelVersion").objects.get().evidence_instruction_id == said.pk
    assert new.get_model("goals", "Goal").objects.get(pk=ids["goal"]).evidence_instruction.pk == said.pk
    # The table keeps its constraints: a sentence is still spent once.
    with pytest.raises(IntegrityError), transaction.atomic():
        ConfirmationUse.objects.create(
            instruction=said, sentence=0, scope="goal_model", subject="goal/1", version=2, span="x"
        )
    ConfirmationUse.objects.create(
        instruction=said,
        sentence=1,
        scope="goal_model",
        subject="goal/1",
        version=2,
        span="Please call me Iain.",
    )
    # The content types were renamed, so the group's permission is now the kernel model's.
    ContentTypes = new.get_model("contenttypes", "ContentType")
    assert not ContentTypes.objects.filter(app_label="beliefs", model__in=MOVED).exists()
    assert set(
        ContentTypes.objects.filter(app_label="operator_site", model__in=MOVED).values_list(
            "model", flat=True
        )
    ) == set(MOVED)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(pk=ids["user"])
    assert user.has_perm("operator_site.add_instruction")
    assert not user.has_perm("beliefs.add_instruction")
