"""Exceptions raised by streamline.

Every error is a subclass of :class:`Error`. The class names follow ONNX Runtime's
(``Fail``, ``InvalidArgument``, ``NoSuchFile``, ``InvalidGraph``, ``NotImplemented``,
``RuntimeException``), so code written for ``onnxruntime`` catches the same things; the
message carries the runtime's context (the input, node, op or file concerned), and ``code``
the runtime's status code name ("InvalidArgument", "NotFound", ...).
"""


class Error(RuntimeError):
    """Base of every streamline error. ``code`` is the runtime's status code name."""

    code = "Internal"

    def __init__(self, message="", code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class Fail(Error):
    """A request or run that could not be done (the generic failure)."""


class InvalidArgument(Error, ValueError):
    """Bad inputs or options: a wrong dtype or shape, an unknown name, an unknown option."""


class InvalidGraph(InvalidArgument):
    """A model that cannot be loaded: corrupt, inconsistent or malformed."""


class NoSuchFile(Error):
    """A model (or other) file that does not exist or cannot be read."""


class NotImplemented(Error, NotImplementedError):  # noqa: A001 (ONNX Runtime's name)
    """Something streamline does not support: an op, a dtype, an opset, an option value."""


class RuntimeException(Error):
    """An internal error of the runtime."""


class ResourceExhausted(Fail):
    """A queue is full or memory ran out."""


class Unavailable(Fail):
    """Shutting down, no device, or a resource that cannot be reached."""


class DeadlineExceeded(Fail):
    """A request waited past its timeout."""


class Cancelled(Fail):
    """A request cancelled by a shutdown."""


_BY_CODE = {
    "InvalidArgument": InvalidArgument,
    "NotFound": NoSuchFile,
    "Unsupported": NotImplemented,
    "ResourceExhausted": ResourceExhausted,
    "Unavailable": Unavailable,
    "DeadlineExceeded": DeadlineExceeded,
    "Cancelled": Cancelled,
    "Internal": RuntimeException,
}


def from_status(code, message, phase=""):
    """The exception for a runtime Status (used by the extension module).

    ``phase`` is "load" while a model loads: InvalidArgument is then an InvalidGraph.
    """
    cls = _BY_CODE.get(code, Fail)
    if phase == "load" and cls is InvalidArgument:
        cls = InvalidGraph
    return cls(message, code)
