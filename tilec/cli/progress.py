"""Progress displays: a rich bar for counted work (`tilec tune`'s compiles, `tilec bench`'s kernels) and a
spinner while a toolchain builds several targets. Shown only on a terminal and never with --quiet; rich is
imported only when one is shown (elsewhere counted work prints one plain line per finished step)."""

from __future__ import annotations

import sys


class Progress:
    """progress(what, done, total): a rich progress bar on a terminal, a plain line when a step finishes
    elsewhere, nothing when quiet. close() ends it."""

    def __init__(self, quiet: bool, prefix: str = "tilec tune"):
        self.quiet = quiet
        self.prefix = prefix
        self.bar = None
        self.tasks: dict[str, object] = {}
        if not quiet and sys.stderr.isatty():
            try:
                from rich.progress import Progress as RichProgress
            except ImportError:
                return
            self.bar = RichProgress(transient=False)
            self.bar.start()

    def __call__(self, what: str, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            if what not in self.tasks:
                self.tasks[what] = self.bar.add_task(what, total=total)
            self.bar.update(self.tasks[what], completed=done)
        elif done == total:
            print(f"{self.prefix}: {what}: {done}/{total}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


class Spinner:
    """A transient rich spinner with elapsed time on standard error, for work that cannot count its steps (one
    toolchain run building several architectures). start() does nothing unless `enabled` (a terminal, no
    --quiet); stop() may be called whether or not it started."""

    def __init__(self, message: str, enabled: bool):
        self.message = message
        self.enabled = enabled
        self.live = None

    def start(self) -> None:
        if not self.enabled or self.live is not None:
            return
        from rich.progress import Progress as RichProgress
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        self.live = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 transient=True, console=_stderr_console())
        self.live.add_task(self.message, total=None)
        self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _stderr_console():
    from rich.console import Console

    return Console(file=sys.stderr)
