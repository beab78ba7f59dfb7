"""bulkhead's exceptions: one per status code, each a ``bulkhead.Error``.

Where a built-in exception fits, the class derives from it as well, so code written for
ONNX Runtime or for plain Python catches them as it would there::

    try:
        bulkhead.InferenceSession("missing.onnx")
    except FileNotFoundError as e:   # bulkhead.NotFound
        print(e)                      # bulkhead's one-line message
"""


class Error(Exception):
    """Any error bulkhead reports. ``code`` is the status code's name."""

    code = "unknown"


class _OneMessage:
    """For classes that are also OSErrors (FileNotFoundError, TimeoutError): keep the
    message whole instead of OSError's (errno, strerror) reading of the arguments."""

    def __init__(self, *args):
        Exception.__init__(self, *args)

    def __str__(self):
        return Exception.__str__(self)


class InvalidArgument(Error, ValueError):
    """Bad input from the caller: names, shapes, types, options."""

    code = "invalid_argument"


class NotFound(_OneMessage, Error, FileNotFoundError):
    """A missing file, input, output, backend or device.

    It is a FileNotFoundError (an OSError) because the usual case is a model path; its
    ``errno`` is None when what is missing is not a file."""

    code = "not_found"


class Unsupported(Error, NotImplementedError):
    """An operator, element type or attribute bulkhead does not implement."""

    code = "unsupported"


class InvalidModel(Error, ValueError):
    """A corrupt or malformed model."""

    code = "invalid_model"


class FailedPrecondition(Error, RuntimeError):
    code = "failed_precondition"


class ResourceExhausted(Error, MemoryError):
    """Out of memory, or past a limit set in the session options."""

    code = "resource_exhausted"


class InternalError(Error, RuntimeError):
    """A broken invariant inside bulkhead: please report it."""

    code = "internal"


class Unavailable(Error, RuntimeError):
    """A worker process or device went away (the session stays usable)."""

    code = "unavailable"


class DeadlineExceeded(_OneMessage, Error, TimeoutError):
    """A run took longer than its time limit."""

    code = "deadline_exceeded"


# Status code values (bulkhead/status.h, bulkhead.h) -> class.
BY_CODE = {
    1: InvalidArgument,
    2: NotFound,
    3: Unsupported,
    4: InvalidModel,
    5: FailedPrecondition,
    6: ResourceExhausted,
    7: InternalError,
    8: Unavailable,
    9: DeadlineExceeded,
}
