from django.db import migrations, models


class Migration(migrations.Migration):
    """``Cell.progress``: how far the group a running cell trains in has come (0–1)."""

    dependencies = [("webapp", "0004_cell_captured")]

    operations = [migrations.AddField("cell", "progress",
                                      models.FloatField(blank=True, null=True))]
