"""Stand-ins that need no torch, so that the tests that use them start fast (the timing loop's
tests run once per mutant in mutation testing)."""


class StandInClock:
    """The timing loop's Timer on the CPU: a call takes what the code it runs says (`took`), or
    `default_ms`; a call may also report late work."""

    def __init__(self, default_ms: float = 1.0):
        self.default_ms, self._next, self._late = default_ms, None, 0.0

    def took(self, ms: float, late_ms: float = 0.0):
        self._next, self._late = ms, late_ms

    def run(self, fn):
        self._next, self._late = None, 0.0
        fn()
        return (self.default_ms if self._next is None else self._next, self._late)

    def sync(self):
        pass

    def read(self, token):
        return token
