"""Errors the user can fix; the command line prints them as one line and exits 2."""

from __future__ import annotations

from anonymizer.quoting import quoted

__all__ = ["REFUSED", "InputChecksFailed", "InputError", "ValidationFailed", "quoted"]

#: the words of the reason of a release the anonymizer refused (no partition meets the
#: requirement under ℓ): the draft path and the plan write them, and the series report finds
#: a refused series by them in the state's audit log, so they are spelled in one place
REFUSED = "cannot publish under ℓ"


class InputError(Exception):
    """Bad input: a file, row, column or option the user must fix. Nothing was changed."""


class InputChecksFailed(InputError):
    """The register or a snapshot failed its input suite (checks.input_suites). Nothing
    was drafted, published or changed; the command line prints every failure and exits 2.

    Attributes:
        failures: one line per failed expectation (suite: what, column, how many, lines).
    """

    def __init__(self, message: str, failures: list[str]) -> None:
        super().__init__(message)
        self.failures = failures


class ValidationFailed(Exception):
    """A draft failed its validation suites; it was marked failed and nothing published.

    Attributes:
        failures: one line per failed expectation (suite: what, where, how many).
    """

    def __init__(self, message: str, failures: list[str]) -> None:
        super().__init__(message)
        self.failures = failures
