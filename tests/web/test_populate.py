"""``manage.py populate_baselines``: the operator's command runs the client's Python API
into the web app's database (one 1-epoch cell: the property, not the protocol)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from harness.storage.models import Cell

pytestmark = pytest.mark.django_db(transaction=True)


def _populate(*args: str) -> str:
    out = io.StringIO()
    call_command("populate_baselines", "--suite", "noisy-labels", "--seeds", "1",
                 "--epochs", "1", *args, stdout=out)
    return out.getvalue()


def test_it_stores_the_baselines_cells_and_skips_them_the_second_time():
    said = _populate("--variants", "clean", "-o", "ce")
    cells = Cell.objects.filter(version__objective__slug="ce")
    assert [(c.suite_version, c.variant, c.seed, c.status) for c in cells] == [
        ("1.0+e1", "clean", 0, "ok")]
    assert "stores results as version" in said and "smoke results stored" in said
    first = cells.get().pk
    _populate("--variants", "clean", "-o", "ce")
    assert list(Cell.objects.values_list("pk", flat=True)) == [first]  # nothing trained again


def test_bad_input_is_refused_in_words_and_stores_nothing():
    assert "none of nowhere is a variant; skipped" in _populate("--variants", "nowhere")
    with pytest.raises(CommandError, match="noisy-labels: .*no-such-loss"):
        _populate("--variants", "clean", "-o", "no-such-loss")
    assert not Cell.objects.exists()
