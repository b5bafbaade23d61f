"""ravel's errors as Python exceptions, one class per rv_status.

Every failing C call returns an rv_status and leaves a message in
rv_last_error(), located where ravel knows where ("m.rv:3:7: error: ...").
:func:`check` turns the two into the exception of that status. Each class
also derives from the built-in exception a Python caller would expect
(a shape mismatch is a ``ValueError``, an index out of bounds an
``IndexError``, ...), so ``except ValueError`` works as it does elsewhere.
"""

import difflib
import re

from ._lib import lib

__all__ = [
    "Error",
    "ParseError",
    "TypeCheckError",
    "ShapeError",
    "BoundsError",
    "ScheduleError",
    "ArgumentError",
    "FileError",
    "CompilerError",
    "OutOfMemoryError",
    "UnsupportedError",
    "check",
]

_LOCATION = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): ")


class Error(Exception):
    """A failure reported by libravel.

    Attributes: ``message`` (ravel's text), ``status`` (the rv_status name,
    e.g. ``"RV_ERR_SHAPE"``), and ``file``, ``line``, ``col`` when the
    message starts with a source location (else None).
    """

    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        m = _LOCATION.match(message)
        self.file = m.group("file") if m else None
        self.line = int(m.group("line")) if m else None
        self.col = int(m.group("col")) if m else None

    def __str__(self):
        return self.message


class ParseError(Error, SyntaxError):
    """Malformed source (RV_ERR_SYNTAX)."""

    status = "RV_ERR_SYNTAX"

    def __init__(self, message, status=None):
        Error.__init__(self, message, status)
        # what tracebacks and IDEs read from a SyntaxError
        self.msg, self.filename, self.lineno, self.offset = message, self.file, self.line, self.col

    def __str__(self):
        return self.message


class TypeCheckError(Error, TypeError):
    """Names, arity, dtypes, extents: the checker (RV_ERR_TYPE)."""

    status = "RV_ERR_TYPE"


class ShapeError(Error, ValueError):
    """An argument whose dtype or shape disagrees with the program (RV_ERR_SHAPE)."""

    status = "RV_ERR_SHAPE"


class BoundsError(Error, IndexError):
    """An index, size or UF value outside its declared range (RV_ERR_BOUNDS)."""

    status = "RV_ERR_BOUNDS"


class ScheduleError(Error, ValueError):
    """An illegal schedule primitive (RV_ERR_SCHEDULE)."""

    status = "RV_ERR_SCHEDULE"


class ArgumentError(Error, ValueError):
    """A bad argument: an unknown or missing name, a wrong kind of value (RV_ERR_ARG)."""

    status = "RV_ERR_ARG"


class FileError(Error, OSError):
    """A file could not be read or written, or is corrupt (RV_ERR_IO)."""

    status = "RV_ERR_IO"

    def __init__(self, message, status=None):
        Error.__init__(self, message, status)

    def __str__(self):
        return self.message


class CompilerError(Error, RuntimeError):
    """The C compiler or NVRTC failed; the message has its output (RV_ERR_COMPILER)."""

    status = "RV_ERR_COMPILER"


class OutOfMemoryError(Error, MemoryError):
    """Out of memory (RV_ERR_OOM)."""

    status = "RV_ERR_OOM"


class UnsupportedError(Error, NotImplementedError):
    """Valid, but not implemented for this target (RV_ERR_UNSUPPORTED)."""

    status = "RV_ERR_UNSUPPORTED"


# by rv_status value (include/ravel.h's enum order)
_BY_STATUS = [
    None,
    ParseError,
    TypeCheckError,
    ShapeError,
    BoundsError,
    ScheduleError,
    ArgumentError,
    FileError,
    CompilerError,
    OutOfMemoryError,
    UnsupportedError,
]


def did_you_mean(name, names):
    """" (did you mean 'X'?)" for the closest of ``names`` (case counts
    least), or ""."""
    lower = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(lower), n=1)
    return " (did you mean '%s'?)" % lower[close[0]] if close else ""


def last_error():
    """The message of the last failure on this thread ("" if none)."""
    return lib.rv_last_error().decode("utf-8", "replace")


def error_for(status, message=None):
    """The exception for rv_status ``status`` with ravel's last message."""
    message = message if message is not None else last_error()
    if 0 < status < len(_BY_STATUS):
        return _BY_STATUS[status](message)
    return Error(message, "status %d (%s)" % (status, lib.rv_status_name(status).decode()))


def check(status):
    """Raises the exception of ``status`` unless it is RV_OK (0)."""
    if status != 0:
        raise error_for(status)
