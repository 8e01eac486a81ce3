"""One exception family: a user-facing message and an exit code; the CLI prints one line."""

from __future__ import annotations

from typing import Any


class ClusterctlError(Exception):
    """An error the user can act on. `str(err)` is the one line printed.

    `result` may carry what was done before the failure (a partial summary): the CLI has already
    printed it as a table, and puts it under "result" in the `--json` error object.
    """

    exit_code = 1
    result: Any = None
    #: the Kafka error name (NOT_CONTROLLER, ...) when the error came from a Kafka request
    kafka_code: str | None = None

    def __init__(self, message: str, *, exit_code: int | None = None, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class SpecError(ClusterctlError):
    """The spec file is missing, unreadable or invalid."""

    exit_code = 2


class UsageError(ClusterctlError):
    """Bad arguments that Typer could not catch (mutually exclusive options, bad k=v pairs)."""

    exit_code = 2


class InputError(UsageError):
    """A bad line of input (stdin or a file); `line` is its 1-based number."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}")


class NotFoundError(ClusterctlError):
    """A topic, group, broker, container or znode that does not exist."""

    exit_code = 3


class UnreachableError(ClusterctlError):
    """A broker, ZooKeeper node or the Docker engine did not answer."""

    exit_code = 4


class TimeoutError_(ClusterctlError):
    """A wait ran out; the message names what was still missing and how long we waited."""

    exit_code = 5


class VerificationError(ClusterctlError):
    """A drill or check found a violated invariant (e.g. an acknowledged write was lost)."""

    exit_code = 6


class FaultNotAppliedError(ClusterctlError):
    """A fault could not be applied (the engine refused it, e.g. a container too busy to freeze); whatever part of
    it had been applied was undone, so the cluster is as it was. Not a failed drill: nothing was tested."""

    exit_code = 75  # sysexits' EX_TEMPFAIL: nothing happened, trying again may work


class CheckpointError(ClusterctlError):
    """A streaming checkpoint that does not fit the run: another job's or other topics', or missing on resume.
    Found before Spark starts, so nothing was read or written."""

    exit_code = 8


class AuthenticationError(ClusterctlError):
    """A secured cluster refused the client: its TLS handshake failed or its SASL credentials were refused."""

    exit_code = 9


class NotAuthorizedError(ClusterctlError):
    """A secured cluster's authorizer denied the operation to the client's user."""

    exit_code = 10


class SpecNotFoundError(SpecError):
    """A spec or scenario file that does not exist: "not found" like any other missing thing."""

    exit_code = 3


class OutputError(ClusterctlError):
    """stdout or stderr could not be written (closed, full, or a character its encoding cannot carry).

    The work done before the failed write stands: the message states it, so a script need not repeat it.
    """

    exit_code = 74  # sysexits.h EX_IOERR
