"""``mms.service``: the exception a handler raises to fail a prediction with its own status code."""

from __future__ import annotations

__all__ = ["PredictionException"]


class PredictionException(Exception):
    """Fails the whole batch with *error_code* (default 500) and *message* in the MMS error body."""

    def __init__(self, message: str, error_code: int = 500) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code

    def __str__(self) -> str:
        return f"{self.message} : {self.error_code}"
