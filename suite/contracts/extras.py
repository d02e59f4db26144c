"""An optional part of the suite whose packages (an extra of pyproject.toml) are not installed. It is
an ImportError, so code that falls back on a missing package still can; a command that needs it
stops with its message and exit code USAGE (cli/common.py), not a traceback. Imports nothing of the
suite: every layer may raise it."""

from __future__ import annotations


class MissingExtra(ImportError):
    """`what` needs the extra `extra` (the packages in `packages`)."""

    def __init__(self, what: str, extra: str, packages: str = ""):
        self.extra = extra
        inner = f" ({packages})" if packages else ""
        super().__init__(f"{what} needs the '{extra}' extra{inner}: pip install 'kernelseek-suite[{extra}]'")
