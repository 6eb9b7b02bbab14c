"""Every error mmsctl raises, in one tree.

The core never prints: it raises one of these, and ``mmsctl/cli/main.py`` turns
it into a one-line message (plus an optional hint) and a named exit code.
Errors from httpx, botocore and mxnet are translated where they come in.

The core never names a CLI flag either: an error says which argument of the call it
is about (``param="synset"``) or has a type of its own (``AlreadyExistsError``), and
the command that called it adds its flags (``mmsctl/cli/hints.py``).

    MmsError                        exit 1
    ├── UsageError                  exit 2   bad flag values, bad input paths
    │   ├── InstanceRunningError        a server instance by that name is already running
    │   └── AmbiguousInstanceError      several server instances, and none was named
    ├── NotFoundError               exit 3
    │   ├── ModelNotFoundError          unknown model name / zoo entry
    │   └── InputNotFoundError          a file or folder that is not there
    ├── PartialFailure              exit 4   some items of a batch failed
    ├── ArchiveError                exit 1   a .mar/.model that cannot be read or written
    │   ├── UnsafeArchiveError          zip-slip, links, devices, zip bombs
    │   ├── AlreadyExistsError          the output is there and may not be replaced
    │   └── NoCheckpointError           no MXNet checkpoint for the built-in handler
    ├── ZooError                    exit 1
    │   ├── DownloadError               network or HTTP failure while downloading
    │   └── OfflineError                offline and not cached
    ├── EngineError                 exit 1   mxnet missing, model fails to load
    │   ├── HandlerError                a handler that cannot be imported or called
    │   │   └── NoHandlerError              no handler, and not a checkpoint the built-in one serves
    │   ├── InputDecodeError            an image/body the handler cannot decode
    │   └── WorkerDiedError             a worker process died
    ├── ServerError                 exit 1   the embedded server fails to start/stop
    │   └── AddressInUseError           another program listens on its port
    ├── ClientError                 exit 1   talking to a remote server
    │   ├── ConnectionFailed        exit 5   refused, DNS, TLS
    │   ├── AuthenticationFailed    exit 6
    │   ├── RequestTimeout          exit 7
    │   └── ApiError                exit 8   the server answered with an error body
    ├── ConfigError                 exit 2   config file / context problems
    └── CloudError                  exit 9   AWS: credentials, access, quota, region
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from mmsctl import exit_codes as codes

__all__ = [
    "AddressInUseError",
    "AlreadyExistsError",
    "AmbiguousInstanceError",
    "ApiError",
    "ArchiveError",
    "AuthenticationFailed",
    "ClientError",
    "CloudError",
    "ConfigError",
    "ConnectionFailed",
    "DownloadError",
    "EngineError",
    "HandlerError",
    "InputDecodeError",
    "InputNotFoundError",
    "InstanceRunningError",
    "MmsError",
    "ModelNotFoundError",
    "NoCheckpointError",
    "NoHandlerError",
    "NotFoundError",
    "OfflineError",
    "PartialFailure",
    "RequestTimeout",
    "ServerError",
    "UnsafeArchiveError",
    "UsageError",
    "WorkerDiedError",
    "ZooError",
    "causes",
]


class MmsError(Exception):
    """Base of everything mmsctl raises on purpose."""

    exit_code: int = codes.ERROR
    reference: str = "mmsctl-error"

    def __init__(self, message: str, *, hint: Optional[str] = None, param: Optional[str] = None,
                 params: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        #: The arguments of the failed call this error is about, by their Python names
        #: (``synset``, ``gpu_id``): a CLI names the flags that set them. *param* is the
        #: main one; *params* the others where an error is about several (``warm`` and ``provisioned``).
        self.params: tuple[str, ...] = tuple(dict.fromkeys([*([param] if param else []), *params]))
        self.param = param or (self.params[0] if self.params else None)

    def __str__(self) -> str:
        return self.message


class UsageError(MmsError):
    """A flag value or argument that cannot be used."""

    exit_code = codes.USAGE
    reference = "usage"


class InstanceRunningError(UsageError):
    """A server instance with that name (or those ports) is already running."""

    reference = "instance-running"

    def __init__(self, message: str, *, holder: Optional[str] = None, held: str = "the name", several: bool = False,
                 hint: Optional[str] = None, param: Optional[str] = None) -> None:
        super().__init__(message, hint=hint, param=param)
        #: The instance that holds what was asked for, what it holds (``the name``, ``port 8080``), and whether
        #: other servers run too (then "stop it" must say which: ``-n NAME``).
        self.holder, self.held, self.several = holder, held, several


class AmbiguousInstanceError(UsageError):
    """Several server instances, and the request did not say which one."""

    reference = "ambiguous-instance"

    def __init__(self, message: str, *, names: Sequence[str] = (), hint: Optional[str] = None,
                 param: Optional[str] = None) -> None:
        super().__init__(message, hint=hint, param=param)
        #: The instances it could have meant.
        self.names = list(names)


class NotFoundError(MmsError):
    """Something named by the user does not exist."""

    exit_code = codes.NOT_FOUND
    reference = "not-found"


class ModelNotFoundError(NotFoundError):
    """An unknown model name, zoo entry or registered model."""

    reference = "model-not-found"


class InputNotFoundError(NotFoundError):
    """An input file or folder that is not there."""

    reference = "input-not-found"


class PartialFailure(MmsError):
    """Some items of a batch failed; the others succeeded and were printed."""

    exit_code = codes.PARTIAL_FAILURE
    reference = "partial-failure"


class ArchiveError(MmsError):
    """A model archive that cannot be read, written or understood."""

    reference = "archive"


class UnsafeArchiveError(ArchiveError):
    """An archive member that would escape the target or is not a plain file."""

    reference = "unsafe-archive"


class AlreadyExistsError(ArchiveError):
    """An output that is already there, and replacing it was not asked for."""

    reference = "already-exists"


class NoCheckpointError(ArchiveError):
    """A folder without the MXNet checkpoint (``*-symbol.json`` + ``*.params``) the built-in handler needs."""

    reference = "no-checkpoint"


class ZooError(MmsError):
    """The model zoo or cache cannot provide a model."""

    reference = "zoo"


class DownloadError(ZooError):
    """A download failed (network, HTTP status, cut connection)."""

    reference = "download"


class OfflineError(ZooError):
    """Offline and the model is not in the cache."""

    reference = "offline"


class EngineError(MmsError):
    """The inference engine cannot load or run a model."""

    reference = "engine"


class HandlerError(EngineError):
    """A handler that cannot be imported, initialised or called."""

    reference = "handler"


class NoHandlerError(HandlerError):
    """A model that names no handler and is not a checkpoint the built-in handler can serve."""

    reference = "no-handler"


class WorkerDiedError(EngineError):
    """A worker process that ran the model died."""

    reference = "worker-died"


class InputDecodeError(EngineError):
    """An input the handler cannot decode (corrupt image, empty body)."""

    reference = "input-decode"


class ServerError(MmsError):
    """The embedded server failed to start, stop or answer."""

    reference = "server"


class AddressInUseError(ServerError):
    """A port the server is to listen on is held by another program."""

    reference = "address-in-use"


class ClientError(MmsError):
    """Talking to a remote model server failed."""

    reference = "client"


class ConnectionFailed(ClientError):
    """Connection refused, DNS failure or TLS error."""

    exit_code = codes.UNREACHABLE
    reference = "connection-failed"


class AuthenticationFailed(ClientError):
    """The server refused our token."""

    exit_code = codes.AUTH_FAILED
    reference = "authentication-failed"


class RequestTimeout(ClientError):
    """The server did not answer in time."""

    exit_code = codes.TIMEOUT
    reference = "timeout"


class ApiError(ClientError):
    """The server answered with an MMS error body ``{"code", "type", "message"}``."""

    exit_code = codes.SERVER_ERROR
    reference = "api-error"

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        type: str = "",
        hint: Optional[str] = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.type = type


class ConfigError(MmsError):
    """A config file, context or environment value that cannot be used."""

    exit_code = codes.USAGE
    reference = "config"


class CloudError(MmsError):
    """AWS refused or could not do what was asked."""

    exit_code = codes.CLOUD_ERROR
    reference = "cloud"


def causes(exc: BaseException) -> list[BaseException]:
    """*exc* and the exceptions it was raised from, outermost first (cycles cut).

    Where errors from httpx and friends are translated, the useful reason
    (``ConnectionRefusedError``, ``socket.gaierror``) is often a few links down.
    """
    chain: list[BaseException] = []
    current: Optional[BaseException] = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
