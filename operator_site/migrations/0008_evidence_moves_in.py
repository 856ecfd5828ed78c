"""The evidence rows (`Instruction`, `ConfirmationUse`) move from beliefs into the kernel: goals and
intents rely on them too. Their tables keep their names (`beliefs_instruction`,
`beliefs_confirmationuse`), so nothing is copied: this migration only tells Django's model state
that the kernel owns them (the tables were created by beliefs 0002-0004, which it follows), and
renames their content types, so admin permissions granted on them and the admin's history of them
follow. beliefs 0005 drops them from the beliefs state once every foreign key points here
(goals 0005, beliefs 0005)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

MOVED = ("instruction", "confirmationuse")


def _relabel(apps, schema_editor, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MOVED:
        if content_type.objects.using(db).filter(app_label=new, model=model).exists():
            continue  # already there (made by a post-migrate signal): leave both as they are
        content_type.objects.using(db).filter(app_label=old, model=model).update(app_label=new)
    content_type.objects.clear_cache()


def forwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, "beliefs", "operator_site")


def backwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, "operator_site", "beliefs")


class Migration(migrations.Migration):
    dependencies = [
        ("operator_site", "0007_principal_evidence_since"),
        ("beliefs", "0004_evidence_approval"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Instruction",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("text", models.TextField()),
                        (
                            "kind",
                            models.CharField(
                                choices=[("instruction", "instruction"), ("comment", "comment")],
                                default="instruction",
                                max_length=12,
                            ),
                        ),
                        (
                            "channel",
                            models.CharField(
                                blank=True,
                                default="",
                                help_text="Where it was said (chat, voice, admin…).",
                                max_length=40,
                            ),
                        ),
                        (
                            "refs",
                            models.JSONField(
                                blank=True, help_text="What it refers to (task ids, links…).", null=True
                            ),
                        ),
                        (
                            "actor",
                            models.CharField(
                                help_text="The recording principal (never a claim).", max_length=64
                            ),
                        ),
                        (
                            "human_authored",
                            models.BooleanField(
                                default=False,
                                help_text="Recorded by a human principal: the only rows that can be evidence.",
                            ),
                        ),
                        (
                            "created_at",
                            models.DateTimeField(db_index=True, default=django.utils.timezone.now),
                        ),
                        (
                            "principal",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="operator_site.principal",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "beliefs_instruction",
                        "ordering": ["-id"],
                    },
                ),
                migrations.CreateModel(
                    name="ConfirmationUse",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "sentence",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="The sentence's position in the instruction (0: the first).",
                                null=True,
                            ),
                        ),
                        ("scope", models.CharField(max_length=32)),
                        ("subject", models.CharField(max_length=250)),
                        (
                            "version",
                            models.PositiveBigIntegerField(help_text="The version of `scope` it authorised."),
                        ),
                        ("span", models.TextField()),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "instruction",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="uses",
                                to="operator_site.instruction",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "beliefs_confirmationuse",
                        "ordering": ["-id"],
                    },
                ),
                migrations.AddIndex(
                    model_name="instruction",
                    index=models.Index(fields=["human_authored", "created_at"], name="instruction_evidence"),
                ),
                migrations.AddConstraint(
                    model_name="confirmationuse",
                    constraint=models.UniqueConstraint(
                        fields=("instruction", "sentence"), name="confirmation_once_per_sentence"
                    ),
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
