"""Error types. Every user-facing failure is a :class:`KernscopeError` with one clear message."""

from __future__ import annotations


class KernscopeError(Exception):
    """Base class for errors shown to users as one line (the CLI exits with code 2)."""


class TraceError(KernscopeError):
    """A trace file could not be read. The message names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class RulesError(KernscopeError):
    """A categorization rule file is invalid."""


class NeedsFullRead(Exception):
    """Internal: a load projection skipped an event the linked trace depends on (e.g. the earliest start);
    the loader reads the trace again without the projection. Never shown to users."""


class PartialFailure(Exception):
    """The command wrote its results, but some inputs failed (the CLI prints the summary and exits with 1)."""


class EmptyAnswer(Exception):
    """The command printed its results, but they are empty for a reason kernscope can see (a trace without GPU
    activity, a step without GPU work); the message names the likely cause and what to do. The CLI prints it
    on stderr and exits with :data:`EXIT_EMPTY`."""


#: exit code of an answer that is empty for a reason the tool can see (2 is bad input, 1 a partial failure)
EXIT_EMPTY = 3
