"""The rate limit the security audit logs share (authentication failures, authorization denials): a client
retrying a bad password or a forbidden request must not flood the log, and the lines left out are counted."""

from __future__ import annotations


class RateLimit:
    """At most `lines_per_second` lines in each wall-clock second."""

    def __init__(self, lines_per_second: int) -> None:
        self.lines_per_second = lines_per_second
        self._second = -1
        self._lines = 0
        self._suppressed = 0

    def admit(self, now_ms: int) -> int | None:
        """None if this line is to be left out; else how many were left out since the last line logged."""
        second = now_ms // 1000
        if second != self._second:
            self._second, self._lines = second, 0
        if self._lines >= self.lines_per_second:
            self._suppressed += 1
            return None
        self._lines += 1
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed
