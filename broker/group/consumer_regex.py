"""The regular expressions of KIP-848 subscriptions (SubscribedTopicRegex): compiled with RE2, as Kafka uses
RE2/J, and the topics each one matches, cached until the metadata image's topics change."""

from __future__ import annotations

from collections.abc import Mapping

import re2  # type: ignore[import-untyped]

# Internal topics never match a subscription's regex.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
MAX_CACHED_REGEXES = 1024


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad regex is its error, answered; not ours to log
# RE2 (C++) error texts -> RE2/J's, which Kafka's INVALID_REGULAR_EXPRESSION message quotes.
_RE2J_ERRORS = {
    "missing )": "missing closing )", "missing ]": "missing closing ]", "unexpected )": "unexpected )",
    "bad repetition operator": "invalid nested repetition operator", "invalid repetition size": "invalid repeat count",
    "no argument for repetition operator": "missing argument to repetition operator",
    "trailing \\": "trailing backslash at end of expression", "invalid named capture group": "invalid named capture",
    "invalid perl operator": "invalid or unsupported Perl syntax",
}


def _re2j_error(error: Exception) -> str:
    text = error.args[0] if error.args else ""
    text = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
    code = text.split(": ", 1)[0]
    return _RE2J_ERRORS.get(code, code)


class InvalidRegexError(Exception):
    """The regex does not compile; the message is Kafka's INVALID_REGULAR_EXPRESSION text."""


class RegexCache:
    def __init__(self) -> None:
        self._compiled: dict[str, object] = {}
        # regex -> the topic names it matches in `_resolved_for` (the image's topic map: a new map, new answers).
        self._resolved: dict[str, frozenset[str]] = {}
        self._resolved_for: object = None

    def compile(self, regex: str) -> object:
        compiled = self._compiled.get(regex)
        if compiled is None:
            try:
                compiled = re2.compile(regex, _RE2_OPTIONS)
            except re2.error as e:
                raise InvalidRegexError(f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
                                        f"{_re2j_error(e)}.") from None
            if len(self._compiled) >= MAX_CACHED_REGEXES:
                self._compiled.clear()
            self._compiled[regex] = compiled
        return compiled

    def resolve(self, regex: str, topics: Mapping[str, object]) -> frozenset[str]:
        """The topics a regex subscription matches (whole names, as RE2/J's matches()), cached until the
        image's topics change: a heartbeat does not scan every topic again."""
        if topics is not self._resolved_for:
            self._resolved.clear()
            self._resolved_for = topics
        resolved = self._resolved.get(regex)
        if resolved is None:
            pattern = self.compile(regex)
            resolved = frozenset(n for n in topics if n not in INTERNAL_TOPICS
                                 and pattern.fullmatch(n) is not None)  # type: ignore[attr-defined]
            if len(self._resolved) >= MAX_CACHED_REGEXES:
                self._resolved.clear()
            self._resolved[regex] = resolved
        return resolved
