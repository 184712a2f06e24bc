"""``harness``: run suites, list what exists, validate objectives, show stored results.

An entry point: it wires the engine, the registered suites and storage (``harness.storage.store``,
imported lazily) together, which engine modules never do. Heavy imports (torch, Django)
happen inside the verbs that need them, so ``harness --help`` and ``harness ls`` stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from harness.contract import draws, registry


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "draws_key", None):  # before the database opens: keyed ones are apart
        print(f"draws: keyed ({draws.use_key(args.draws_key)})", file=sys.stderr)
    try:
        return args.func(args)
    except KeyboardInterrupt as exc:
        from harness.api import Interrupted

        if isinstance(exc, Interrupted):  # the run said what was kept
            return 130
        print("\ninterrupted: finished cells are stored; the unfinished group was discarded",
              file=sys.stderr)
        return 130


DRAWS_KEY_HELP = (
    "draw every split, noise, order and initialisation from the key in FILE (16+ characters) "
    "as a server ranking strangers does; stored apart from public results (docs/sandbox.md)")
SANDBOX_HELP = (
    "load, check and train objective files in the sandbox the server's workers use: the "
    "file is never imported in this process (built-in baselines still run in-process). "
    "Without --sandbox a local file runs as your own code, with your rights (your files, "
    "your network, the results database)")
EPOCHS_HELP = "shorten training for a smoke run (stored as suite version V+eN, apart from "\
    "real results)"
WORKERS_HELP = "processes training cell groups at once (default: one per core, $HARNESS_WORKERS)"


def _training(verb: argparse.ArgumentParser) -> None:
    """The flags of how cells train, the same for `run suite` and `profile`."""
    verb.add_argument("--set", action="append", default=[], metavar="K=V", dest="overrides",
                      help="override a hyperparameter of the objective (repeatable)")
    verb.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    verb.add_argument("--epochs", type=int, help=EPOCHS_HELP)
    verb.add_argument("--sandbox", action="store_true", help=SANDBOX_HELP)
    verb.add_argument("--workers", type=int, metavar="N", help=WORKERS_HELP)
    verb.add_argument("--draws-key", metavar="FILE", type=_key, help=DRAWS_KEY_HELP)


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
    suite.add_argument("--tuned", action="store_true",
                       help="the suite's tuned protocol: every objective (the reference "
                            "too) gets the same k trials of the learning rate, the tuned "
                            "settings and its SEARCH_SPACE, chosen on a validation split, "
                            "then the chosen trial on the seeds; stored apart (V+tunedK); "
                            "with --sandbox, each trial's loss served from the sandbox")
    suite.add_argument("--sequential", type=int, metavar="CAP",
                       help="seeds where the verdict is undecided: start with one member "
                            "chunk (5 seeds), add a chunk to each objective and variant whose "
                            "comparison with the reference is undecided, up to CAP seeds, "
                            "stopping by O'Brien-Fleming boundaries that keep the error rate "
                            "at 5%% for normal per-seed differences (instead of --seeds)")
    suite.add_argument("--mode", choices=("auto", "vmap", "loop"), default="auto",
                       help="seed batching: auto falls back to a loop when vmap fails")
    suite.add_argument("--force", action="store_true", help="rerun cells already stored")
    suite.add_argument("--data-root", help="where real datasets live ($HARNESS_DATA)")
    suite.add_argument("--download", action="store_true",
                       help="download real datasets if missing (needs the network)")
    suite.add_argument("--json", action="store_true", help="print results as JSON")
    suite.add_argument("--row-order-from", metavar="URL",
                       help="with --sandbox: send each batch's rows to the loss in the order "
                            "that server's sandbox uses for this objective version (its key, "
                            "fetched with $HARNESS_TOKEN), so that `harness submit` can be "
                            "verified to the last bit; needs the network")
    _training(suite)
    suite.set_defaults(func=cmd_run_suite)

    prof = verbs.add_parser(
        "profile", help="an objective on every suite it fits, with one aggregate score",
        description="Run OBJECTIVE (and each suite's reference) on the ranked variants of "
                    "every suite whose hooks it defines or lifts, reusing stored cells, then "
                    "print per suite its improvement over the reference with the verdict, "
                    "its normalized score and its rank among the suite's baselines, and the "
                    "aggregate score over the suites.")
    prof.add_argument("objective", help="file.py, built-in name or dotted module")
    prof.add_argument("--suites", nargs="+", metavar="S", help="only these suites")
    prof.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    prof.add_argument("--baselines", action="store_true",
                      help="also run every suite's baselines where not stored, so the ranks "
                           "are among all of them (the default ranks among those stored)")
    prof.add_argument("--json", action="store_true", help="print the profile as JSON")
    prof.add_argument("--tuned", action="store_true",
                      help="the tuned track: on the suites with a tuned protocol, the "
                           "objective and each reference tuned with the same budget, the "
                           "aggregate over those suites (docs/tuning.md)")
    _training(prof)
    prof.set_defaults(func=cmd_profile)

    demo = verbs.add_parser(
        "demo", help="fill every suite: each reference and the literature's key contrasts",
        description="Train, where not stored yet, each suite's reference and the key "
                    "contrasts of its literature on its ranked variants (harness/demo.py "
                    "lists them), then print the cross-suite scores the home page ranks.")
    demo.add_argument("--full", action="store_true",
                      help="every baseline on every default variant: the full sweep")
    demo.add_argument("--seeds", type=int, help="seeds 0..N-1 on every suite (default: the "
                      "fewest that give a verdict, a whole member chunk: 5, 3 on the "
                      "unlearning suites; with --full 5)")
    demo.add_argument("--workers", type=int, metavar="N", help=WORKERS_HELP)
    demo.set_defaults(func=cmd_demo)

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
    results.add_argument("--draws-key", metavar="FILE", type=_key, help="runs under this key")
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
    """A thin layer over :func:`harness.api.run`: flags in, tables (or JSON) out."""
    from harness import api

    if args.overrides and len(args.objective or ()) != 1:
        return _fail("--set applies to one objective: pass exactly one --objective")
    if args.seed and args.seeds is not None:
        return _fail("--seed S picks seeds one by one, --seeds N the first N: give one of them")
    if args.row_order_from and not args.sandbox:
        return _fail("--row-order-from sets the sandbox's row order: add --sandbox")
    if args.sequential is not None and (args.seeds is not None or args.seed):
        return _fail("--sequential CAP chooses the seeds itself: drop --seeds and --seed")
    if args.factorial is not None and (args.seeds is not None or args.seed):
        return _fail("--factorial N chooses the seeds itself (N levels per stream): drop "
                     "--seeds and --seed")
    from harness.objectives.loading import ObjectiveError, parse_assignments

    try:
        results = api.run(
            args.name, args.objective, variants=args.variants,
            seeds=sorted(set(args.seed)) if args.seed else (
                5 if args.seeds is None else args.seeds),
            hyperparameters=parse_assignments(args.overrides), epochs=args.epochs,
            device=args.device, mode=args.mode, sandbox=args.sandbox, force=args.force,
            workers=args.workers, data_root=args.data_root, download=args.download,
            row_order_from=args.row_order_from, factorial=args.factorial, tuned=args.tuned,
            sequential=args.sequential,
            progress=False if args.json else "terminal",
            say=lambda message: _say(message, args))
    except ObjectiveError as exc:
        check = "harness validate --sandbox FILE" if args.sandbox else "harness validate FILE"
        return _fail(exc.message + f"\n(run `{check}` for a full check)")
    except api.HarnessError as exc:
        return _fail(exc.message)
    if args.factorial is not None:
        return _print_factorial(results, args)
    return _print_tables(results, args)


def _print_factorial(results, args) -> int:
    """Per objective and variant: the headline's variance split by seed stream."""
    if args.json:
        from harness.report.jsonsafe import finite_or_none

        print(json.dumps(finite_or_none(results.variance_json()), indent=1, allow_nan=False))
        return 0
    from harness.terminal import render_factorial

    render_factorial(results.suite, results.variance())
    return 0


# --- profile --------------------------------------------------------------------------

def cmd_profile(args: argparse.Namespace) -> int:
    """A thin layer over :func:`harness.api.profile`."""
    from harness import api
    from harness.objectives.loading import ObjectiveError, parse_assignments

    try:
        found = api.profile(
            args.objective, suites=args.suites, seeds=args.seeds,
            hyperparameters=parse_assignments(args.overrides), baselines=args.baselines,
            epochs=args.epochs, device=args.device, sandbox=args.sandbox, workers=args.workers,
            tuned=args.tuned, progress=False if args.json else "terminal",
            say=lambda message: _say(message, args))
    except ObjectiveError as exc:
        return _fail(exc.message)
    except api.HarnessError as exc:
        return _fail(exc.message)
    if args.json:
        from harness.report.jsonsafe import finite_or_none

        print(json.dumps(finite_or_none(found.to_json()), indent=1, allow_nan=False))
        return 0
    from harness.terminal import render_profile

    render_profile(found.payload)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from harness import api, demo

    try:
        demo.run(full=args.full, seeds=args.seeds, workers=args.workers, progress="terminal",
                 say=lambda message: _say(message, args))
    except api.HarnessError as exc:
        return _fail(exc.message)
    from harness.terminal import render_scores
    from webapp.leaderboard import home_table

    render_scores(home_table())
    return 0


# --- results --------------------------------------------------------------------------

def cmd_results(args: argparse.Namespace) -> int:
    """A thin layer over :func:`harness.api.results`."""
    from harness import api

    names = [args.suite] if args.suite else registry.suite_names()
    shown = 0
    try:
        for name in names:
            results = api.results(name, variants=args.variants)
            if results.versions:
                _print_tables(results, args)
                shown += 1
    except api.HarnessError as exc:
        return _fail(exc.message)
    if not shown:
        where = names[0] if args.suite else "any suite"
        print(f"no stored results for {where} yet: run `harness run suite "
              f"{names[0] if args.suite else 'NAME'}`")
    elif not args.suite and not args.json and not args.variants:
        from harness.terminal import render_scores
        from webapp.leaderboard import home_table

        render_scores(home_table())  # the home page's score, as `harness demo` ends
    return 0


def _print_tables(results, args) -> int:
    if args.json:
        from harness.report.jsonsafe import finite_or_none

        print(json.dumps(finite_or_none(results.to_json()), indent=1, allow_nan=False))
        return 0
    from harness.terminal import render_across, render_tables

    tables = results.tables()
    render_tables(results.suite, tables.order, tables.rows, tables.columns)
    if tables.across is not None:
        render_across(results.suite, tables.drawn, tables.across, tables.left_out)
    if results.suite.track != "defaults":
        from harness.terminal import render_tuning

        render_tuning(results.suite, results.tuning())
    if results.sequential is not None:
        from harness.terminal import render_sequential

        render_sequential(results.sequential)
    return 0


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
    from harness.api import setup

    setup()
    from harness.storage import local_results

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
    """A thin layer over :func:`harness.api.validate`."""
    from harness import api
    from harness.objectives.loading import ObjectiveError, is_file_spec, parse_assignments
    from harness.report.textsafe import printable

    try:
        overrides = parse_assignments(args.overrides)
    except ObjectiveError as exc:
        return _fail(exc.message)
    if args.sandbox and not is_file_spec(args.objective):
        return _fail(f"{args.objective}: --sandbox checks objective files; pass a .py file")
    try:
        validation = api.validate(args.objective, hyperparameters=overrides,
                                  sandbox=args.sandbox)
    except api.HarnessError as exc:
        return _fail(exc.message)
    print(printable(validation.format()))
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

def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is an integer from 0, got {text!r}")
    return value


def _key(path: str) -> str:
    try:
        return draws.read_key_file(path)
    except draws.DrawsKeyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _say(message: str, args) -> None:  # args: a namespace, --json or not
    """A note to the user; what it quotes (an objective's error or captured output) may
    hold control characters, which are shown escaped (:func:`harness.report.textsafe.printable`)."""
    from harness.report.textsafe import printable

    print(printable(message), file=sys.stderr if getattr(args, "json", False) else sys.stdout)


def _fail(message: str) -> int:
    from harness.report.textsafe import printable

    print(f"harness: {printable(message)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
