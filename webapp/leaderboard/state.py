"""What a suite's cached payloads depend on: its cells' fingerprints and its table versions.

A per-variant payload (a variant's table, its headline values) is valid while that
variant's fingerprint and the suite's *table versions* (``store.latest_versions`` plus
the reference version, with their labels) are unchanged: a cell landing in variant A
leaves variant B's payloads as they are, unless it changes which versions the tables show
(a version's first trained cell), which changes every variant's key. The table versions
are themselves cached under the suite's fingerprint (any change to them changes a cell of
the suite), so a warm page still costs one aggregate query and one cache read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef, Q

from harness.contract.suite import Suite
from harness.storage import store
from harness.storage.models import Cell, Objective, ObjectiveVersion
from webapp.leaderboard import cache


@dataclass
class SuiteState:
    suite: Suite
    fingerprint: str  # of the suite's finished cells
    per_variant: dict[str, str]  # variant -> fingerprint of its finished cells
    versions: list[ObjectiveVersion] = field(default_factory=list)  # after resolve()
    ref: ObjectiveVersion | None = None
    versions_fp: str = ""

    def variant_fp(self, variant: str) -> str:
        """The key fingerprint of a per-variant payload (call :func:`resolve` first)."""
        assert self.versions_fp, "resolve() the table versions first"
        return cache.combine([self.per_variant.get(variant, cache.EMPTY), self.versions_fp])


def state_of(suite: Suite) -> SuiteState:
    fp, per_variant = cache.suite_fingerprints(suite)
    return SuiteState(suite, fp, per_variant)


def states_of(suites: list[Suite]) -> list[SuiteState]:
    """Every suite's state from one aggregate query."""
    fps = cache.all_variant_fingerprints()
    return [SuiteState(s, *fps.get((s.name, s.version), (cache.EMPTY, {}))) for s in suites]


def versions_key(suite: Suite) -> str:
    return cache.key("versions", suite.name, suite.version)


def resolve(state: SuiteState, stored: cache.Stored) -> None:
    """Fill the table versions from ``stored`` (a read that included
    :func:`versions_key`) when they were stored under the current suite fingerprint, else
    from the database (and store them). The fingerprint was taken before this read."""
    if state.versions_fp:
        return
    hit = stored.get(versions_key(state.suite))
    if hit is not None and hit[0] == state.fingerprint:
        entry = hit[1]
    else:
        entry = _versions_entry(state.suite)
        cache.store([(versions_key(state.suite), state.fingerprint, entry)])
    objectives = {o["id"]: Objective(id=o["id"], slug=o["slug"], name=o["name"],
                                     is_builtin=o["is_builtin"]) for o in entry["objectives"]}
    state.versions = [ObjectiveVersion(id=v["id"], objective=objectives[v["objective_id"]],
                                       label=v["label"], code_sha256=v["code_sha256"])
                      for v in entry["versions"]]
    state.ref = next((v for v in state.versions if v.pk == entry["ref"]), None)
    state.versions_fp = cache.combine(
        [f"{v['id']}:{v['label']}:{v['code_sha256']}" for v in entry["versions"]]
        + [f"ref:{entry['ref']}"])


def _versions_entry(suite: Suite) -> dict:
    """``storage.latest_versions`` plus ``storage.reference_version`` in one query: every
    version with a trained cell in the suite version, or of the reference at its defaults."""
    trained = Cell.objects.filter(version=OuterRef("pk"), suite=suite.name,
                                  suite_version=suite.version,
                                  status__in=(Cell.OK, Cell.DIVERGED))
    rows = list(ObjectiveVersion.objects.annotate(trained=Exists(trained))
                .filter(Q(trained=True) | Q(objective__slug=suite.reference,
                                            label=suite.reference))
                .exclude(objective__in=store.hidden_objectives())  # staff hid it: no board
                .order_by("objective_id", "label", "-created", "-id")
                .values("id", "objective_id", "label", "code_sha256", "trained", "created",
                        "objective__slug", "objective__name", "objective__is_builtin"))
    chosen: dict[int, dict] = {}
    newest: set[tuple[int, str]] = set()
    for r in rows:  # per (objective, label), the newest trained version
        if r["trained"] and (r["objective_id"], r["label"]) not in newest:
            newest.add((r["objective_id"], r["label"]))
            chosen[r["id"]] = r
    refs = sorted((r for r in rows if r["objective__slug"] == suite.reference
                   and r["label"] == suite.reference),
                  key=lambda r: (r["created"], r["id"]), reverse=True)
    ref = refs[0] if refs else None
    if ref is not None:
        chosen.setdefault(ref["id"], ref)
    return {"versions": [{"id": r["id"], "objective_id": r["objective_id"],
                          "label": r["label"], "code_sha256": r["code_sha256"]}
                         for r in chosen.values()],
            "objectives": [{"id": r["objective_id"], "slug": r["objective__slug"],
                            "name": r["objective__name"],
                            "is_builtin": r["objective__is_builtin"]}
                           for r in {r["objective_id"]: r for r in chosen.values()}.values()],
            "ref": ref["id"] if ref is not None else None}
