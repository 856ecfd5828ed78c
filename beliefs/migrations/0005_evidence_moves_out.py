"""The evidence rows (`Instruction`, `ConfirmationUse`) now belong to the kernel (operator_site
0008): the world model's evidence columns point there, and beliefs forgets the two models. Their
tables stay as they are (the kernel's models keep their names), so the database is not touched.
It follows goals 0005, so no model still points at `beliefs.Instruction` when it goes."""

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
        ("beliefs", "0004_evidence_approval"),
        ("operator_site", "0008_evidence_moves_in"),
        ("goals", "0005_evidence_instruction_in_the_kernel"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                _to_the_kernel("belief"),
                _to_the_kernel("worldmodelversion"),
                migrations.DeleteModel(name="ConfirmationUse"),
                migrations.DeleteModel(name="Instruction"),
            ],
        ),
    ]
