"""The JSON API against its own served OpenAPI document, with requests schemathesis
generates from it: no 5xx, status codes and content types the document declares, bodies
that match its response schemas, and what the document calls invalid refused."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

from tests.web.test_leaderboard import CE, GCE, make_objective


@pytest.fixture
def api_schema(transactional_db):
    from django.core.wsgi import get_wsgi_application

    make_objective("ce", CE, curves=True)
    make_objective("gce", GCE)
    return schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())


@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode))
def test_the_api_keeps_its_served_contract(api_schema, mode):
    """Every operation of the served document, 60 generated requests each (derandomized:
    the same requests every run): valid ones (positive) must be answered as documented,
    invalid ones (negative) refused with a documented 4xx. One failure per operation is
    reported, all at once."""
    failures = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 5
    for operation in operations:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=60, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case):
            case.call_and_validate()

        try:
            check()
        except Unsatisfiable:  # nothing to get wrong: an operation without parameters
            assert mode == schemathesis.GenerationMode.NEGATIVE and not operation.query
        except Exception as exc:  # noqa: BLE001 - collected, reported below
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
