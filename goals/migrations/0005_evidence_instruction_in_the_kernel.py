"""The goal model's evidence columns point at the kernel's `Instruction` (operator_site 0008). The
table they reference is the same (`beliefs_instruction`), so the database is not touched."""

import django.db.models.deletion
from django.db import migrations, models


def _to_the_kernel(model_name: str) -> migrations.AlterField:
    return migrations.AlterField(
        model_name=model_name,
        name="evidence_instruction",
        field=models.ForeignKey(
            blank=True,
            null=True,
            on_delete=django.db.models.deletion.PROTECT,
            related_name="+",
            to="operator_site.instruction",
        ),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("goals", "0004_evidence_approval"),
        ("operator_site", "0008_evidence_moves_in"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                _to_the_kernel("goal"),
                _to_the_kernel("goalmodelversion"),
                _to_the_kernel("priority"),
                _to_the_kernel("project"),
            ],
        ),
    ]
