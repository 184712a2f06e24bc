"""``harness``: run suites, list what exists, validate objectives, show stored results.

This entry point wires the engine, the suites and storage together. Heavy imports
(torch, Django) happen inside the verbs that need them, so ``harness --help`` and
``harness ls`` stay fast.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import sys
from pathlib import Path

from harness.objectives.builtin import BUILTIN_NAMES, builtin_path


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("\ninterrupted: finished cells are stored; the unfinished group was discarded",
              file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    run = verbs.add_parser("run", help="run a suite")
    run_what = run.add_subparsers(dest="what", required=True)
    suite = run_what.add_parser("suite", help="run every (objective, variant, seed) cell")
    suite.add_argument("name", help="suite name, e.g. noisy-labels (see `harness ls`)")
    suite.add_argument("--objective", "-o", action="append", metavar="X",
                       help="file.py, built-in name or dotted module (repeatable; "
                            "default: every built-in defining the suite's hook)")
    suite.add_argument("--variants", nargs="+", metavar="V", help="default: the public set")
    suite.add_argument("--seeds", type=int, default=5, help="number of seeds (0..N-1)")
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
    suite.add_argument("--sandbox", action="store_true",
                       help="train objective files in the sandbox the server's workers use "
                            "(built-in baselines still run in-process)")
    suite.set_defaults(func=cmd_run_suite)

    ls = verbs.add_parser("ls", help="list suites, variants and built-in objectives")
    ls.set_defaults(func=cmd_ls)

    validate = verbs.add_parser("validate", help="check an objective file before running it")
    validate.add_argument("objective")
    validate.add_argument("--set", action="append", default=[], metavar="K=V", dest="overrides")
    validate.set_defaults(func=cmd_validate)

    results = verbs.add_parser("results", help="tables of stored results")
    results.add_argument("suite", nargs="?", default="noisy-labels")
    results.add_argument("--variants", nargs="+", metavar="V")
    results.add_argument("--json", action="store_true")
    results.set_defaults(func=cmd_results)

    new = verbs.add_parser("new", help="start a new objective from the template")
    new_what = new.add_subparsers(dest="what", required=True)
    new_obj = new_what.add_parser("objective", help="write NAME.py from the template")
    new_obj.add_argument("name")
    new_obj.add_argument("--output", help="file to write (default: ./NAME.py)")
    new_obj.set_defaults(func=cmd_new_objective)
    return parser


# --- run ------------------------------------------------------------------------------

def cmd_run_suite(args: argparse.Namespace) -> int:
    from suites import get_suite

    suite = get_suite(args.name)
    if args.epochs:
        suite = suite.shortened(args.epochs)
    variants = args.variants or suite.default_variants
    for v in variants:
        suite.variant(v)
    specs = args.objective or default_objectives(suite)
    if args.overrides and len(specs) != 1:
        return _fail("--set applies to one objective: pass exactly one --objective")

    from harness.objectives.loading import ObjectiveError, load_objective, parse_assignments

    try:
        overrides = parse_assignments(args.overrides)
        objectives = [load_objective(s, overrides if args.overrides else None) for s in specs]
    except ObjectiveError as exc:
        return _fail(exc.message + "\n(run `harness validate FILE` for a full check)")
    unusable = [o.name for o in objectives if not suite.supports(o.hooks)]
    if unusable:
        return _fail(f"{', '.join(unusable)}: no {' or '.join(suite.accepted_hooks)} hook, "
                     f"which the {suite.name} suite needs")
    if suite.reference not in {o.name for o in objectives}:
        objectives.insert(0, load_objective(suite.reference))  # P(improvement) needs it

    _setup_django()
    import torch

    from harness.environment import environment
    from webapp import storage

    torch.set_num_threads(_threads())
    device = _device(args.device)
    env = environment(device)
    seeds = list(range(args.seeds))
    versions, plan = [], []
    for obj in objectives:
        version = storage.version_for(obj)
        versions.append(version)
        done = set() if args.force else storage.finished_cells(version, suite, variants, seeds)
        todo = [v for v in variants if any((v, s) not in done for s in seeds)]
        plan.append((obj, version, todo))
    total = sum(len(todo) * len(seeds) for _, _, todo in plan)
    skipped = len(objectives) * len(variants) * len(seeds) - total
    if skipped:
        _say(f"{skipped} cells already stored (use --force to rerun them)", args)
    options = {"device": device, "mode": args.mode, "data_root": args.data_root,
               "download": args.download}
    with _progress(total, args) as advance:
        for obj, version, todo in plan:
            if not todo:
                continue
            try:
                if args.sandbox and obj.origin != "builtin":
                    results = _sandboxed(suite, obj, todo, seeds, device, args)
                    advance(obj.label)(len(todo) * len(seeds))
                else:
                    results = suite.run_cells(obj, todo, seeds, progress=advance(obj.label),
                                              **options)
            except FileNotFoundError as exc:  # a real dataset that is not there
                return _fail(str(exc))
            storage.store_results(version, suite, results, env)
            _report_problems(obj.label, results, args)
    return _print_tables(suite, variants, versions, args)


def _sandboxed(suite, obj, variants: list[str], seeds: list[int], device: str, args):
    """The objective's cells as a worker runs a submission: in the sandbox, judged here."""
    from harness.sandbox import run_cells_sandboxed

    return run_cells_sandboxed(suite, obj.source, Path(obj.path).name or "objective.py",
                               dict(obj.hyperparameters), variants, seeds,
                               threads=_threads(), device=device, data_root=args.data_root)


def default_objectives(suite) -> list[str]:
    """The built-ins that define the suite's own hook, in display order (no torch import).

    A suite may also run objectives through a hook it lifts (the certified suite lifts
    ``classification_loss``); those run when named with ``--objective``, so that a default
    run stays the suite's own baselines (the CLI adds the reference when it is missing).
    """
    return [n for n in BUILTIN_NAMES if suite.hook in defined_hooks(builtin_path(n))]


def defined_hooks(path: Path) -> set[str]:
    """Names of the known hooks a module file defines at top level, read from its AST."""
    from harness.objectives.spec import HOOKS

    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in HOOKS}


def _report_problems(label: str, results, args) -> None:
    modes = {r.info.get("fallback_reason") for r in results if r.info.get("fallback_reason")}
    for reason in modes:
        _say(f"{label}: cannot run seed-batched ({reason}); ran a per-seed loop instead", args)
    failed = [r for r in results if r.status in ("failed", "killed", "timeout")]
    if failed:
        first = failed[0]
        why = f" ({first.status}: {first.reason})" if first.reason else ""
        _say(f"{label}: {len(failed)} cells did not finish{why}:\n{first.error}", args)
        if first.output:
            _say(f"its output:\n{first.output}", args)
    diverged = [r for r in results if r.status == "diverged"]
    if diverged:
        _say(f"{label}: {len(diverged)} seeds diverged (non-finite loss); see the div column",
             args)


# --- results --------------------------------------------------------------------------

def cmd_results(args: argparse.Namespace) -> int:
    from suites import get_suite

    suite = get_suite(args.suite)
    _setup_django()
    from webapp import storage

    versions = storage.latest_versions(suite)
    if not versions:
        print(f"no stored results for {suite.name} yet: run `harness run suite {suite.name}`")
        return 0
    return _print_tables(suite, args.variants, versions, args)


def _print_tables(suite, variants, versions, args) -> int:
    from harness.report import variant_tables
    from webapp import storage

    ref = storage.reference_version(suite)
    chosen = {v.id: v for v in versions}
    if ref is not None:
        chosen.setdefault(ref.id, ref)
    headline = suite.metric(suite.headline)
    secondary = tuple(m.name for m in suite.metrics if m.name != suite.headline)[:2]
    tables = variant_tables(storage.cell_rows(suite, variants, chosen.values()),
                            headline=headline.name, higher_is_better=headline.higher_is_better,
                            reference=suite.reference, secondary=secondary)
    order = [v for v in (variants or [v.name for v in suite.variants]) if v in tables]
    if args.json:
        print(json.dumps(_finite_or_null(_tables_json(suite, order, tables)), indent=1,
                         allow_nan=False))
        return 0
    from harness.tables import render_tables

    render_tables(suite, order, tables, secondary)
    return 0


def _tables_json(suite, order, tables) -> dict:
    out = {"suite": suite.name, "suite_version": suite.version, "headline": suite.headline,
           "reference": suite.reference, "variants": {}}
    for v in order:
        out["variants"][v] = [{
            "objective": r.objective, "seeds": r.seeds, "diverged": r.diverged,
            "failed": r.failed, **{k: getattr(r.summary, k) for k in
                                   ("mean", "std", "ci_low", "ci_high", "iqm")},
            "secondary": r.secondary, "tied_with_best": r.tied_with_best,
            "p_improvement": r.vs_reference.prob_improvement if r.vs_reference else None,
            "distinguishable": r.vs_reference.distinguishable if r.vs_reference else None,
        } for r in tables[v]]
    return out


def _finite_or_null(value):
    """NaN/inf (a metric that does not apply, the mean of no seeds) become null: valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(v) for v in value]
    return value


# --- ls, validate, new ----------------------------------------------------------------

def cmd_ls(args: argparse.Namespace) -> int:
    from suites import get_suite, suite_names

    print("Suites:")
    for name in suite_names():
        s = get_suite(name)
        print(f"  {s.name} (v{s.version}, hook {s.hook}, headline {s.headline}): "
              f"{s.description}")
        for v in s.variants:
            tag = "" if v.default else f"   [opt-in, real data, {v.queue} queue]"
            print(f"    {v.name:<18} {v.description}{tag}")
    print("\nBuilt-in objectives:")
    for name in BUILTIN_NAMES:
        print(f"  {name:<16} {_docstring_title(builtin_path(name))}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.objectives.loading import ObjectiveError, parse_assignments
    from harness.objectives.validate import validate

    try:
        overrides = parse_assignments(args.overrides)
    except ObjectiveError as exc:
        return _fail(exc.message)
    report = validate(args.objective, overrides or None)
    print(report.format())
    return 0 if report.ok else 1


def cmd_new_objective(args: argparse.Namespace) -> int:
    from harness.objectives.template import render

    name = args.name.removesuffix(".py")
    if not name.isidentifier():
        return _fail(f"{name!r} is not a valid Python module name")
    path = Path(args.output or f"{name}.py")
    if path.exists():
        return _fail(f"{path} exists; not overwriting it")
    path.write_text(render(name))
    print(f"wrote {path}: edit classification_loss, then run\n"
          f"  harness validate {path}\n  harness run suite noisy-labels --objective {path}")
    return 0


# --- helpers --------------------------------------------------------------------------

def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def _threads() -> int:
    return int(os.environ.get("HARNESS_THREADS") or len(os.sched_getaffinity(0)))


def _device(name: str) -> str:
    import torch

    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("harness: --device cuda asked for, but torch sees no CUDA device")
    return name


def _docstring_title(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _progress(total: int, args):
    from harness.tables import progress_bar

    return progress_bar(total, quiet=args.json)


def _say(message: str, args) -> None:
    print(message, file=sys.stderr if args.json else sys.stdout)


def _fail(message: str) -> int:
    print(f"harness: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
