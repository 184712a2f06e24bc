"""``harness``: run suites, list what exists, validate objectives, show stored results.

An entry point: it wires the engine, the registered suites and storage (``webapp.storage``,
imported lazily) together, which engine modules never do. Heavy imports (torch, Django)
happen inside the verbs that need them, so ``harness --help`` and ``harness ls`` stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from harness import registry


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("\ninterrupted: finished cells are stored; the unfinished group was discarded",
              file=sys.stderr)
        return 130


SANDBOX_HELP = (
    "load, check and train objective files in the sandbox the server's workers use: the "
    "file is never imported in this process (built-in baselines still run in-process). "
    "Without --sandbox a local file runs as your own code, with your rights (your files, "
    "your network, the results database)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    run = verbs.add_parser("run", help="run a suite")
    run_what = run.add_subparsers(dest="what", required=True)
    suite = run_what.add_parser("suite", help="run every (objective, variant, seed) cell")
    suite.add_argument("name", help="suite name (see `harness ls`)")
    suite.add_argument("--objective", "-o", action="append", metavar="X",
                       help="file.py, built-in name or dotted module (repeatable; "
                            "default: the suite's own baselines)")
    suite.add_argument("--variants", nargs="+", metavar="V", help="default: the public set")
    suite.add_argument("--seeds", type=int, help="number of seeds (0..N-1; default 5)")
    suite.add_argument("--seed", type=_seed, action="append", metavar="S",
                       help="only this seed (repeatable; instead of --seeds): e.g. to "
                            "reproduce a stored cell with --force. It trains with the same "
                            "seeds as in any run (its whole member chunk), so its numbers "
                            "are the same")
    suite.add_argument("--factorial", type=int, metavar="N",
                       help="where the seed variance comes from: every combination of N "
                            "levels of each seed stream (init, data order, noise draw), "
                            "N**3 cells per objective and variant, stored apart from the "
                            "seeds; prints each stream's share of the variance")
    suite.add_argument("--set", action="append", default=[], metavar="K=V", dest="overrides",
                       help="override a hyperparameter of the objective (repeatable)")
    suite.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    suite.add_argument("--mode", choices=("auto", "vmap", "loop"), default="auto",
                       help="seed batching: auto falls back to a loop when vmap fails")
    suite.add_argument("--epochs", type=int, help="shorten training for a smoke run (stored "
                       "as suite version V+eN, apart from real results)")
    suite.add_argument("--force", action="store_true", help="rerun cells already stored")
    suite.add_argument("--data-root", help="where real datasets live ($HARNESS_DATA)")
    suite.add_argument("--download", action="store_true",
                       help="download real datasets if missing (needs the network)")
    suite.add_argument("--json", action="store_true", help="print results as JSON")
    suite.add_argument("--sandbox", action="store_true", help=SANDBOX_HELP)
    suite.add_argument("--row-order-from", metavar="URL",
                       help="with --sandbox: send each batch's rows to the loss in the order "
                            "that server's sandbox uses for this objective version (its key, "
                            "fetched with $HARNESS_TOKEN), so that `harness submit` can be "
                            "verified to the last bit; needs the network")
    suite.add_argument("--workers", type=int, metavar="N",
                       help="processes training cell groups at once (default: one per core, "
                            "$HARNESS_WORKERS)")
    suite.set_defaults(func=cmd_run_suite)

    ls = verbs.add_parser("ls", help="list suites, variants and built-in objectives")
    ls.set_defaults(func=cmd_ls)

    validate = verbs.add_parser("validate", help="check an objective file before running it")
    validate.add_argument("objective")
    validate.add_argument("--set", action="append", default=[], metavar="K=V", dest="overrides")
    validate.add_argument("--sandbox", action="store_true",
                          help="check the file in the sandbox, as the server checks a "
                               "submission: it is never imported in this process. Without "
                               "--sandbox the file runs as your own code, with your rights")
    validate.set_defaults(func=cmd_validate)

    results = verbs.add_parser("results", help="tables of stored results")
    results.add_argument("suite", nargs="?", help="default: every suite with results")
    results.add_argument("--variants", nargs="+", metavar="V")
    results.add_argument("--json", action="store_true")
    results.set_defaults(func=cmd_results)

    submit = verbs.add_parser(
        "submit", help="upload an objective's local results to a server, which verifies them",
        description="Upload FILE's stored results on a suite (from `harness run`) to a "
                    "leaderboard server. The server re-runs a random sample of the seeds and "
                    "lists the results as verified only when its numbers equal yours exactly.")
    submit.add_argument("objective", metavar="FILE", help="the objective file that was run")
    submit.add_argument("--suite", required=True, help="the suite whose results to upload")
    submit.add_argument("--set", action="append", default=[], metavar="K=V", dest="overrides",
                        help="the hyperparameters the run used (as given to `harness run`)")
    submit.add_argument("--variants", nargs="+", metavar="V",
                        help="default: the suite's public variants with results")
    submit.add_argument("--epochs", type=int, help="upload the shortened run (suite version "
                        "V+eN) made with `harness run --epochs N`")
    submit.add_argument("--server", default=os.environ.get("HARNESS_SERVER"),
                        help="the server's URL ($HARNESS_SERVER)")
    submit.add_argument("--token", help="an API token from your account page on the server "
                        "($HARNESS_TOKEN; prefer that: a command line is visible to others)")
    submit.add_argument("--private", action="store_true",
                        help="only you see the code on the server (results are public once "
                             "verified either way)")
    submit.add_argument("--wait", action="store_true",
                        help="wait for the server's verdict (exit 0 only when verified)")
    submit.set_defaults(func=cmd_submit)

    new = verbs.add_parser("new", help="start a new objective from the template")
    new_what = new.add_subparsers(dest="what", required=True)
    new_obj = new_what.add_parser("objective", help="write NAME.py from the template")
    new_obj.add_argument("name")
    new_obj.add_argument("--output", help="file to write (default: ./NAME.py)")
    new_obj.set_defaults(func=cmd_new_objective)
    return parser


# --- run ------------------------------------------------------------------------------

def cmd_run_suite(args: argparse.Namespace) -> int:
    suite = registry.get_suite(args.name)
    if args.epochs:
        suite = suite.shortened(args.epochs)
    variants = args.variants or suite.default_variants
    for v in variants:
        suite.variant(v)
    from harness import heldout

    held = [v.name for v in suite.held_out]
    asked = [v for v in variants if v in held]
    if asked and not heldout.available():
        return _fail(f"{', '.join(asked)}: held out. Its split and draws come from the "
                     f"server's secret, so it runs only on the server, for every ranked "
                     f"submission; its result shows there beside its public twin")
    if held and not args.variants:
        _say(f"held out (run only on the server, from its secret): {', '.join(held)}", args)
    specs = args.objective or list(suite.baselines)
    if args.overrides and len(specs) != 1:
        return _fail("--set applies to one objective: pass exactly one --objective")

    from harness.objectives.loading import ObjectiveError, load_objective, parse_assignments

    unavailable = _sandbox_unavailable() if args.sandbox else ()

    try:
        overrides = parse_assignments(args.overrides)
        objectives = [_load(s, overrides if args.overrides else None, args.sandbox)
                      for s in specs]
    except ObjectiveError as exc:
        check = "harness validate --sandbox FILE" if args.sandbox else "harness validate FILE"
        return _fail(exc.message + f"\n(run `{check}` for a full check)")
    except unavailable as exc:
        return _fail(f"the sandbox is unavailable here: {exc}")
    unusable = [o for o in objectives if not suite.supports(o.hooks)]
    if unusable:
        return _fail("; ".join(
            f"{o.name} defines {', '.join(o.hooks) or 'no hook'}, but the {suite.name} suite "
            f"runs only objectives defining {' or '.join(suite.accepted_hooks)}"
            for o in unusable))
    if args.seed and args.seeds is not None:
        return _fail("--seed S picks seeds one by one, --seeds N the first N: give one of them")
    if args.row_order_from and not args.sandbox:
        return _fail("--row-order-from sets the sandbox's row order: add --sandbox")
    factorial = args.factorial is not None
    if factorial:
        problem = _factorial_problem(suite, args)
        if problem:
            return _fail(problem)
    elif suite.reference not in {o.name for o in objectives}:
        objectives.insert(0, load_objective(suite.reference))  # P(improvement) needs it
        specs.insert(0, suite.reference)

    _setup_django()
    from harness.environment import environment
    from harness.parallel import default_workers, run_groups
    from harness.pipeline import prepare_fixtures
    from webapp import storage

    device = _device(args.device)
    env = environment(device)
    if factorial:
        from harness.seeding import factorial_seeds

        seeds = factorial_seeds(suite.seed_streams, args.factorial)
        finished, store = storage.finished_factorial, storage.store_factorial
    else:
        seeds = (sorted(set(args.seed)) if args.seed
                 else list(range(5 if args.seeds is None else args.seeds)))
        finished, store = storage.finished_cells, storage.store_results
    workers = args.workers or default_workers()
    versions, groups = [], []  # groups: (label, version, LocalGroup)
    for spec, obj in zip(specs, objectives, strict=True):
        version = storage.version_for(obj)
        versions.append(version)
        done = set() if args.force else finished(version, suite, variants, seeds)
        todo = [v for v in variants if any((v, s) not in done for s in seeds)]
        if todo:
            sandboxed = args.sandbox and obj.origin != "builtin"
            group = _group(spec, obj, suite, todo, seeds, sandboxed)
            if sandboxed and args.row_order_from:
                try:
                    group = replace(group, row_secret=_server_row_key(args, obj))
                except RuntimeError as exc:
                    return _fail(f"the row order of {args.row_order_from}: {exc}")
            groups.append((obj.label, version, group))
    groups = _spread(groups, workers)
    owner = {id(g): (label, version) for label, version, g in groups}
    total = sum(g.cells for _, _, g in groups)
    skipped = len(objectives) * len(variants) * len(seeds) - total
    if skipped:
        _say(f"{skipped} cells already stored (use --force to rerun them)", args)
    options = {"device": device, "mode": args.mode, "data_root": args.data_root,
               "download": args.download}
    pending = sorted({v for _, _, g in groups for v in g.variants}, key=variants.index)
    if pending:
        try:
            built = prepare_fixtures(suite, [suite.variant(v) for v in pending], seeds,
                                     data_root=args.data_root, download=args.download)
        except FileNotFoundError as exc:  # a real dataset that is not there
            return _fail(str(exc))
        if built:
            _say(f"fixtures: {built}", args)
    with _progress(total, args) as advance:
        def stored(group, results) -> None:
            label, version = owner[id(group)]
            store(version, suite, results, env)
            _report_problems(label, results, args)

        try:
            run_groups([g for _, _, g in groups], workers=workers, options=options,
                       on_progress=lambda g, cells: advance(owner[id(g)][0])(cells),
                       on_done=stored)
        except FileNotFoundError as exc:  # a real dataset that is not there
            return _fail(str(exc))
        except unavailable as exc:  # e.g. HARNESS_SANDBOX_STRICT=1 on a machine without it
            return _fail(f"the sandbox is unavailable here: {exc}")
    if factorial:
        return _print_factorial(suite, variants, versions, args)
    return _print_tables(suite, variants, versions, args)


def _factorial_problem(suite, args) -> str:
    from harness.seeding import MAX_LEVELS

    if not suite.seed_streams:
        return (f"the {suite.name} suite declares no seed streams (Suite.seed_streams), so "
                f"its variance cannot be split by source")
    if args.seeds is not None or args.seed:
        return ("--factorial N chooses the seeds itself (N levels per stream): drop --seeds "
                "and --seed")
    if not 2 <= args.factorial < MAX_LEVELS:
        return f"--factorial needs 2 to {MAX_LEVELS - 1} levels per stream, got {args.factorial}"
    return ""


def _print_factorial(suite, variants, versions, args) -> int:
    """Per objective and variant: the headline's variance split by seed stream."""
    from harness.seeding import FACTORS
    from harness.variance import complete_grid, decompose
    from webapp import storage

    head = suite.headline_metric
    report = []
    for variant in variants:
        scores = storage.factorial_scores(suite, variant, head.name, versions=versions)
        for version in versions:
            grid = complete_grid(scores.get(version, {}), suite.seed_streams)
            d = None if grid is None else decompose(grid, FACTORS)
            report.append((version.label, variant, len(scores.get(version, {})), d))
    if args.json:
        from harness.jsonsafe import finite_or_none

        print(json.dumps(finite_or_none({"suite": suite.name, "version": suite.version,
                                         "metric": head.name, "rows": [
            {"objective": label, "variant": variant, "cells": n,
             "decomposition": None if d is None else _decomposition_json(d)}
            for label, variant, n, d in report]}), indent=1, allow_nan=False))
        return 0
    from harness.terminal import render_factorial

    render_factorial(suite, report)
    return 0


def _decomposition_json(d) -> dict:
    return {"levels": dict(zip(d.factors, d.levels, strict=True)), "mean": d.mean,
            "sd": d.total_sd, "sources": [
                {"source": s.name, "variance": s.variance, "share": s.share,
                 "share_low": s.share_low, "share_high": s.share_high} for s in d.sources]}


def _server_row_key(args, obj) -> str:
    from harness import upload

    token = os.environ.get("HARNESS_TOKEN")
    if not token:
        raise RuntimeError(f"no API token: make one on your account page "
                           f"({args.row_order_from.rstrip('/')}/accounts/) and set "
                           f"HARNESS_TOKEN")
    try:
        return upload.row_key(args.row_order_from, token, obj.version_key)
    except upload.UploadFailed as exc:
        raise RuntimeError(str(exc)) from None


def _group(spec, obj, suite, variants, seeds, sandboxed):
    from harness.parallel import LocalGroup

    if sandboxed:  # the text that was checked and is stored; all its hyperparameters
        return LocalGroup(obj.path, suite.name, suite.version, tuple(variants), tuple(seeds),
                          tuple(obj.hyperparameters.items()), True, source=obj.source)
    # Its own overrides only (--set names one objective, not the reference added to it).
    changed = tuple((k, v) for k, v in obj.hyperparameters.items() if obj.defaults.get(k) != v)
    return LocalGroup(obj.path if obj.origin == "file" else spec, suite.name,
                      suite.version, tuple(variants), tuple(seeds), changed, False)


def _load(spec: str, overrides, sandbox: bool):
    """The objective ``spec`` names. With ``sandbox``, a file is only read here: the sandbox
    loads and checks it (:func:`sandboxed_objective`); built-ins load here (trusted)."""
    from harness.objectives.loading import ObjectiveError, is_file_spec, load_objective

    if sandbox and is_file_spec(spec):
        validation = sandboxed_objective(spec, overrides)
        if validation.objective is None:  # it could not be loaded there
            errors = [p for p in validation.problems if p.severity == "error"]
            raise ObjectiveError(errors[0].code if errors else "sandbox",
                                 "\n".join(p.message for p in errors)
                                 or f"{spec} could not be loaded in the sandbox")
        return validation.objective
    if sandbox and spec not in registry.builtins() and "." in spec:
        raise ObjectiveError("sandbox", f"{spec}: --sandbox runs objective files, and "
                             f"importing a module would run it here; pass its .py file")
    return load_objective(spec, overrides)


def sandboxed_objective(spec: str, overrides):
    """Validate the file ``spec`` in the sandbox (:func:`harness.sandbox.validate_sandboxed`):
    its :class:`Validation`, whose objective, when the file loaded there, is metadata only
    (no callable hook), named and versioned as :func:`load_objective` would: name from the
    path, code hash from the text read here, hyperparameters from the defaults the sandbox
    reported and ``overrides`` coerced here. Raises :class:`ObjectiveError` for a file that
    is missing or not UTF-8, or overrides that do not fit."""
    from dataclasses import replace

    from harness.objectives.loading import ObjectiveError, coerce_overrides, read_source
    from harness.sandbox import validate_sandboxed

    path = Path(spec)
    if not path.is_file():
        raise ObjectiveError("not-found", f"objective file {spec} does not exist")
    source = read_source(path)
    validation = validate_sandboxed(source, path.name, overrides or None)
    described = validation.objective
    if described is None:
        return validation
    hyperparameters = {**described.defaults,
                       **coerce_overrides(overrides or {}, described.defaults)}
    validation.objective = replace(described, name=path.stem, source=source,
                                   path=str(path.resolve()), hyperparameters=hyperparameters)
    return validation


def _spread(groups: list[tuple], workers: int) -> list[tuple]:
    """``(label, version, group)`` entries, groups split by variant until every worker has
    one, biggest first: two processes each batching some members beat one process batching
    all (bench/dispatch.py). Results do not depend on the split: every cell trains in its
    own member chunk (harness/chunks.py)."""
    from dataclasses import replace

    groups = list(groups)
    while len(groups) < workers:
        i = max(range(len(groups)), key=lambda k: len(groups[k][2].variants), default=None)
        if i is None or len(groups[i][2].variants) < 2:
            break
        label, version, group = groups[i]
        half = len(group.variants) // 2
        groups[i:i + 1] = [(label, version, replace(group, variants=group.variants[:half])),
                           (label, version, replace(group, variants=group.variants[half:]))]
    return groups


def _report_problems(label: str, results, args) -> None:
    modes = {r.info.get("fallback_reason") for r in results if r.info.get("fallback_reason")}
    for reason in modes:
        _say(f"{label}: cannot run seed-batched ({reason}); ran a per-seed loop instead", args)
    failed = [r for r in results if r.status in ("failed", "killed", "timeout")]
    if failed:
        first = failed[0]
        why = f" ({first.status}: {first.reason})" if first.reason else ""
        # The error and the output are the objective's: _say escapes control characters.
        _say(f"{label}: {len(failed)} cells did not finish{why}:\n{first.error}", args)
        if first.captured:
            _say(f"its output:\n{first.captured}", args)
    diverged = [r for r in results if r.status == "diverged"]
    if diverged:
        _say(f"{label}: {len(diverged)} seeds diverged (non-finite loss); see the div column",
             args)


# --- results --------------------------------------------------------------------------

def cmd_results(args: argparse.Namespace) -> int:
    _setup_django()
    from webapp import storage

    names = [args.suite] if args.suite else registry.suite_names()
    shown = 0
    for name in names:
        suite = registry.get_suite(name)
        versions = storage.latest_versions(suite)
        if versions:
            _print_tables(suite, args.variants, versions, args)
            shown += 1
    if not shown:
        where = names[0] if args.suite else "any suite"
        print(f"no stored results for {where} yet: run `harness run suite "
              f"{names[0] if args.suite else 'NAME'}`")
    return 0


def _print_tables(suite, variants, versions, args) -> int:
    from harness.tables import variant_tables
    from webapp import storage

    ref = storage.reference_version(suite)
    chosen = {v.id: v for v in versions}
    if ref is not None:
        chosen.setdefault(ref.id, ref)
    headline = suite.headline_metric
    rows = storage.cell_rows(suite, variants, chosen.values())
    tracks = suite.tracks or (None,)
    found, shown_columns = [], []
    for track in tracks:  # a table per variant and track, the reference in each
        secondary = track.columns if track and track.columns else suite.table_columns[:2]
        part = rows if track is None else [
            r for r in rows if r.track == track.name or r.objective == suite.reference]
        found.append(variant_tables(part, headline=headline.name,
                                    higher_is_better=headline.higher_is_better,
                                    reference=suite.reference, secondary=secondary,
                                    min_seeds=suite.min_seeds))
        shown_columns.append(secondary)
    tables, order, columns, drawn = {}, [], {}, []
    for v in variants or [v.name for v in suite.variants]:
        for track, table, secondary in zip(tracks, found, shown_columns, strict=True):
            if v in table and (track is None or any(not r.is_reference for r in table[v])):
                key = v if track is None else f"{v} · {track.label}"
                tables[key], columns[key] = table[v], secondary
                order.append(key)
                drawn.append(v)
    drawn = list(dict.fromkeys(drawn))
    across = None
    if len(drawn) > 1:  # the mean over the shown variants and the worst of them
        from harness.tables import across_variants

        across = across_variants(rows, drawn, headline=headline.name,
                                 higher_is_better=headline.higher_is_better,
                                 reference=suite.reference)
    if args.json:
        from harness.jsonsafe import finite_or_none

        report = _tables_json(suite, order, tables)
        if across is not None:
            report["across_variants"] = _across_json(drawn, *across)
        print(json.dumps(finite_or_none(report), indent=1, allow_nan=False))
        return 0
    from harness.terminal import render_tables

    render_tables(suite, order, tables, columns)
    if across is not None:
        _render_across(suite, drawn, *across)
    return 0


def _across_json(variants, rows, left_out) -> dict:
    return {"variants": variants, "left_out": left_out,
            "rows": [{"objective": r.objective, "mean": r.mean, "worst": r.worst,
                      "worst_variant": r.worst_variant, "means": r.means} for r in rows]}


def _render_across(suite, variants, rows, left_out) -> None:
    """The across-variants table: per objective, the mean of its per-variant headline means
    and its worst variant, formatted like the per-variant tables."""
    from rich.console import Console
    from rich.table import Table

    from harness.terminal import shown

    head = suite.headline_metric
    console = Console(width=None if sys.stdout.isatty() else 140)
    title = (f"{suite.name} v{suite.version} · across variants · {head.label} "
             f"({head.better} is better)")
    table = Table(title=title, title_justify="left", header_style="bold",
                  min_width=len(title))
    table.add_column("objective")
    table.add_column(f"mean over {len(variants)} variants", justify="right")
    table.add_column("worst variant", justify="right")
    for r in rows:
        name = shown(r.objective) + (" (ref)" if r.is_reference else "")
        table.add_row(name, head.format(r.mean),
                      f"{head.format(r.worst)} ({shown(r.worst_variant)})")
    console.print(table)
    notes = [f"across variants: mean over {', '.join(variants)} of each objective's "
             f"per-variant mean; worst = its worst variant ({head.better} is better)"]
    if left_out:
        notes.append(f"left out (no result on every shown variant): "
                     f"{', '.join(shown(x) for x in left_out)}")
    console.print("\n".join(notes), highlight=False)


def _tables_json(suite, order, tables) -> dict:
    out = {"suite": suite.name, "suite_version": suite.version, "headline": suite.headline,
           "headline_metric": suite.headline_metric.to_json(),
           "reference": suite.reference, "variants": {}}
    for v in order:
        out["variants"][v] = [{
            "objective": r.objective, "seeds": r.seeds, "diverged": r.diverged,
            "failed": r.failed, **{k: getattr(r.summary, k) for k in
                                   ("mean", "std", "ci_low", "ci_high", "iqm")},
            "secondary": r.secondary, "tied_with_best": r.tied_with_best,
            "p_improvement": r.vs_reference.prob_improvement if r.vs_reference else None,
            "improvement": r.vs_reference.mean_diff if r.vs_reference else None,
            "distinguishable": r.vs_reference.distinguishable if r.vs_reference else None,
        } for r in tables[v]]
    return out


# --- submit ---------------------------------------------------------------------------

def cmd_submit(args: argparse.Namespace) -> int:
    from harness import upload
    from harness.objectives.loading import ObjectiveError, load_objective, parse_assignments

    token = args.token or os.environ.get("HARNESS_TOKEN")
    if not args.server:
        return _fail("which server? pass --server URL or set HARNESS_SERVER")
    if not token:
        return _fail(f"no API token: make one on your account page ({args.server.rstrip('/')}"
                     f"/accounts/) and set HARNESS_TOKEN (or pass --token)")
    if not Path(args.objective).is_file():
        return _fail(f"{args.objective}: no such file (harness submit uploads the results of "
                     f"an objective file you ran with `harness run`)")
    if upload.sends_in_clear(args.server):
        print(f"warning: {args.server} is plain http: your token crosses the network "
              f"unencrypted (use https)", file=sys.stderr)
    suite = registry.get_suite(args.suite)
    if args.epochs:
        suite = suite.shortened(args.epochs)
    for v in args.variants or ():
        suite.variant(v)
        if v not in suite.default_variants:
            return _fail(f"{v} is an opt-in variant of {suite.name}; a server verifies only "
                         f"its default variants ({', '.join(suite.default_variants)})")
    try:
        loaded = load_objective(args.objective, parse_assignments(args.overrides) or None)
    except ObjectiveError as exc:
        return _fail(exc.message)
    _setup_django()
    from webapp import local_results

    try:
        version = local_results.local_version(loaded, args.objective, suite)
        body = local_results.body(version, suite, args.variants, private=args.private)
    except local_results.NotUploadable as exc:
        return _fail(str(exc))
    plain = sum(not isinstance(c["environment"].get("sandbox"), dict) for c in body["cells"])
    if plain:
        print(f"note: {plain} of the {len(body['cells'])} cells trained without --sandbox; the "
              f"server trains its sample in the sandbox, where a reported training loss can "
              f"differ in the last bit (the upload is then unverifiable, not a mismatch). "
              f"`harness run ... --sandbox` trains as the server does.", file=sys.stderr)
    try:
        answer = upload.post(args.server, token, body)
    except upload.UploadFailed as exc:
        return _fail(str(exc))
    print(upload.describe(answer, args.server))
    if not args.wait:
        return 0
    try:
        answer = upload.wait(args.server, token, answer["id"])
    except upload.UploadFailed as exc:
        return _fail(str(exc))
    print(upload.describe(answer, args.server))
    return 0 if answer["status"] == "verified" else 1


# --- ls, validate, new ----------------------------------------------------------------

def cmd_ls(args: argparse.Namespace) -> int:
    print("Suites:")
    for s in registry.all_suites():
        hooks = " or ".join(s.accepted_hooks)
        head = s.headline_metric
        print(f"  {s.name} (v{s.version}, hook {hooks}, headline {s.headline}, "
              f"{head.better} is better): {s.description}")
        for v in s.variants:
            tag = "" if v.default else f"   [opt-in, real data, {v.queue} queue]"
            print(f"    {v.name:<18} {v.description}{tag}")
        for v in s.held_out:
            print(f"    {v.name:<18} {v.description}   [held out: drawn from the server's "
                  f"secret, runs only there; shown beside {v.held_out_of}]")
        print(f"    baselines: {', '.join(s.baselines)}")
    print("\nBuilt-in objectives:")
    for name, builtin in registry.builtins().items():
        where = f" [{builtin.suite}]" if builtin.suite else ""
        print(f"  {name:<16} {registry.docstring_title(builtin.path)}{where}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.objectives.loading import ObjectiveError, parse_assignments
    from harness.objectives.validate import validate
    from harness.textsafe import printable

    try:
        overrides = parse_assignments(args.overrides)
    except ObjectiveError as exc:
        return _fail(exc.message)
    if args.sandbox:
        return _validate_in_sandbox(args.objective, overrides)
    validation = validate(args.objective, overrides or None)
    print(printable(validation.format()))
    return 0 if validation.ok else 1


def _validate_in_sandbox(spec: str, overrides) -> int:
    from harness.objectives.loading import ObjectiveError, is_file_spec
    from harness.objectives.validate import Problem, Validation
    from harness.sandbox import SandboxUnavailable
    from harness.textsafe import printable

    if not is_file_spec(spec):
        return _fail(f"{spec}: --sandbox checks objective files; pass a .py file")
    try:
        validation = sandboxed_objective(spec, overrides)
    except ObjectiveError as exc:
        validation = Validation(spec, problems=[Problem(exc.code, "error", exc.message)])
    except SandboxUnavailable as exc:
        return _fail(f"the sandbox is unavailable here: {exc}")
    text = validation.format()
    if validation.ok and validation.objective is not None:
        # Its hooks are names only here (their signatures stayed in the sandbox).
        o = validation.objective
        hp = ", ".join(f"{k}={v!r}" for k, v in o.hyperparameters.items())
        text = text.rpartition("\n\n")[0] + ("\n\n" if text.count("\n\n") else "")
        text += (f"OK: {o.name} — {', '.join(o.hooks)}" + (f" ({hp})" if hp else "")
                 + " (checked in the sandbox)")
    print(printable(text))
    return 0 if validation.ok else 1


def cmd_new_objective(args: argparse.Namespace) -> int:
    from harness.objectives.template import render

    name = args.name.removesuffix(".py")
    if not name.isidentifier():
        return _fail(f"{name!r} is not a valid Python module name")
    path = Path(args.output or f"{name}.py")
    if path.exists():
        return _fail(f"{path} exists; not overwriting it")
    path.write_text(render(name))
    first = registry.suite_names()[0]
    print(f"wrote {path}: edit classification_loss, then run\n"
          f"  harness validate {path}\n  harness run suite {first} --objective {path}")
    return 0


# --- helpers --------------------------------------------------------------------------

def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def _sandbox_unavailable() -> type[Exception]:
    from harness.sandbox import SandboxUnavailable

    return SandboxUnavailable


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is an integer from 0, got {text!r}")
    return value


def _device(name: str) -> str:
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("harness: --device cuda asked for, but torch sees no CUDA device")
    return name


def _progress(total: int, args):
    from harness.terminal import progress_bar

    return progress_bar(total, quiet=args.json)


def _say(message: str, args) -> None:
    """A note to the user; what it quotes (an objective's error or captured output) may
    hold control characters, which are shown escaped (:func:`harness.textsafe.printable`)."""
    from harness.textsafe import printable

    print(printable(message), file=sys.stderr if args.json else sys.stdout)


def _fail(message: str) -> int:
    from harness.textsafe import printable

    print(f"harness: {printable(message)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
