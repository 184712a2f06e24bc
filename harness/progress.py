"""Progress of a run, where the user is: a rich bar in a terminal, tqdm's notebook bar
(a widget with ipywidgets, text without) in Jupyter, or nothing.

Every bar is a context manager yielding ``advance(label)``, which returns the callback
the trainer calls with fractions of cells done (:func:`harness.runner.processes.run_groups`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

Advance = Callable[[str], Callable[[float], None]]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's ZMQ shell), not in a terminal IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def bar(total: int, kind: str | bool = "auto") -> contextlib.AbstractContextManager[Advance]:
    """The progress bar for ``total`` cells: ``kind`` "auto" (notebook or terminal, as
    :func:`in_notebook` says), "notebook", "terminal", or False/"none" for none."""
    if kind is True or kind == "auto":
        kind = "notebook" if in_notebook() else "terminal"
    if kind in (False, "none") or total == 0:
        return silent()
    if kind == "notebook":
        return notebook_bar(total)
    if kind == "terminal":
        from harness.terminal import progress_bar

        return progress_bar(total)
    raise ValueError(f"progress must be 'auto', 'notebook', 'terminal' or False, got {kind!r}")


@contextlib.contextmanager
def silent() -> Iterator[Advance]:
    yield lambda label: (lambda cells: None)


@contextlib.contextmanager
def notebook_bar(total: int) -> Iterator[Advance]:
    import warnings

    with warnings.catch_warnings():  # without ipywidgets tqdm falls back to text: fine
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm

        progress = tqdm(total=total, unit="cell", desc="cells",
                        bar_format="{desc:<22} {bar} {n:.0f}/{total} [{elapsed}<{remaining}]")
    try:
        def advance(label: str) -> Callable[[float], None]:
            progress.set_description_str(label[:22])
            return lambda cells: progress.update(cells)

        yield advance
        progress.set_description_str("done")
        progress.n = total
        progress.refresh()
    finally:
        progress.close()
