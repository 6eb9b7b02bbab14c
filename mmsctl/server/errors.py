"""HTTP errors of the server, named and coded like MMS's Java exceptions.

Each becomes an MMS error body ``{"code", "type", "message"}``; ``type`` is the
Java class name MMS sends, so clients that switch on it keep working.
"""

from __future__ import annotations

from typing import Optional

from mmsctl.errors import ServerError

__all__ = [
    "ApiException", "BadRequest", "ConflictError", "InternalServerError", "InvalidKey",
    "InvalidModel", "MethodNotAllowed", "ModelNotFound", "ModelVersionNotFound", "RequestTimeout", "RequestTooLarge",
    "ResourceNotFound", "ServiceUnavailable", "INTERNAL_ERROR",
]

#: What a client is told of a failure inside the server: never the exception, which names code and data the
#: client has no business seeing (the server log has it, under the answer's ``x-request-id``).
INTERNAL_ERROR = "Internal server error; the server log has the details."


class ApiException(ServerError):
    """An error answered to an HTTP client: its status, MMS's type and message, and why (``cause``, the body's
    fourth key) where the message is MMS's fixed text."""

    status = 500
    type_name = "InternalServerException"

    def __init__(self, message: str, *, retry_after: Optional[int] = None, cause: Optional[str] = None,
                 status: Optional[int] = None, close: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.cause = cause
        #: The connection ends after the answer (what follows the request is not read as the next one).
        self.close = close
        if status is not None:
            self.status = status

    @property
    def detail(self) -> str:
        """The message with its cause, for a log line or a CLI error."""
        return f"{self.message}: {self.cause}" if self.cause else self.message


class BadRequest(ApiException):
    status, type_name = 400, "BadRequestException"


class InvalidModel(ApiException):
    status, type_name = 400, "InvalidModelException"


class DownloadFailed(ApiException):
    status, type_name = 400, "DownloadModelException"


class InvalidKey(ApiException):
    status, type_name = 401, "InvalidKeyException"


class ModelNotFound(ApiException):
    status, type_name = 404, "ModelNotFoundException"


class ModelVersionNotFound(ApiException):
    status, type_name = 404, "ModelVersionNotFoundException"


class ResourceNotFound(ApiException):
    status, type_name = 404, "ResourceNotFoundException"

    def __init__(self, message: str = "Requested resource is not found, please refer to API document.") -> None:
        super().__init__(message)


class MethodNotAllowed(ApiException):
    status, type_name = 405, "MethodNotAllowedException"

    def __init__(self, message: str = "Requested method is not allowed, please refer to API document.") -> None:
        super().__init__(message)


class RequestTimeout(ApiException):
    status, type_name = 408, "RequestTimeoutException"


class ConflictError(ApiException):
    status, type_name = 409, "ConflictStatusException"


class RequestTooLarge(ApiException):
    status, type_name = 413, "RequestEntityTooLargeException"


class InternalServerError(ApiException):
    status, type_name = 500, "InternalServerException"


class ServiceUnavailable(ApiException):
    status, type_name = 503, "ServiceUnavailableException"
