"""What each belief's key reads as (`Belief.key_alike`, `operator_site.lookalikes.fold`), so that an
add whose key reads as an active belief's under another key is refused (docs/world-model.md, "Keys").
Every stored key is folded here, a look-alike stored before this rule included: a plain key added
next to it is then refused too."""

from typing import Any

from django.db import migrations, models

from operator_site.lookalikes import fold


def fold_stored_keys(apps: Any, schema_editor: Any) -> None:
    Belief = apps.get_model("beliefs", "Belief")
    batch: list[Any] = []
    for row in Belief.objects.only("id", "key").order_by("id").iterator(chunk_size=2000):
        row.key_alike = fold(row.key)
        batch.append(row)
        if len(batch) == 2000:  # a large world model is folded in bounded memory
            Belief.objects.bulk_update(batch, ["key_alike"], batch_size=500)
            batch = []
    Belief.objects.bulk_update(batch, ["key_alike"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("beliefs", "0005_evidence_moves_out")]

    operations = [
        migrations.AddField(
            model_name="belief",
            name="key_alike",
            field=models.CharField(default="", editable=False, max_length=480),
        ),
        migrations.RunPython(fold_stored_keys, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name="belief",
            index=models.Index(fields=["kind", "key_alike"], name="belief_kind_key_alike"),
        ),
    ]
