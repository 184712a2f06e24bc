from django.db import migrations


class Migration(migrations.Migration):
    """``Cell.output`` → ``Cell.captured``: the sandboxed child's captured stdout and stderr
    (one name for it everywhere; a trainer's arrays are its outputs)."""

    dependencies = [("webapp", "0003_cell_lifecycle")]

    operations = [migrations.RenameField("cell", "output", "captured")]
