"""gretel_synthetics.errors."""

from .._core import TooManyInvalidError


class GenerationError(RuntimeError):
    pass


__all__ = ["TooManyInvalidError", "GenerationError"]
