"""One retry policy for every remote provider.

The SDKs (openai, voyageai) each ship their own retry loop with different rules; we switch
them off (``max_retries=0``) so that this module alone decides what is retried, how long to
wait and how often, and so that tests can observe it through an injected ``sleep``.

Retried: HTTP 408, 409, 429 and every 5xx, plus connection errors and timeouts.
Not retried: every other 4xx (400/401/403/404/413/422 ...): repeating them cannot help.
"""

from __future__ import annotations

import email.utils
import functools
import math
import random
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: 4xx statuses that a single bad input can cause (so bisecting a batch can isolate it).
INPUT_ERROR_STATUSES = frozenset({400, 413, 422})


class ProviderHTTPError(Exception):
    """A provider answered with an HTTP error; the generic form for providers without an SDK."""

    def __init__(
        self, status: int, headers: Mapping[str, str] | None = None, message: str = ""
    ) -> None:
        super().__init__(message or f"HTTP {status}")
        self.status = int(status)
        self.headers: Mapping[str, str] = dict(headers or {})


@functools.cache
def _connection_error_types() -> tuple[type[BaseException], ...]:
    """Connection/timeout exception classes of the SDKs we use (imported lazily, if present)."""
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import openai

        types.append(openai.APIConnectionError)  # APITimeoutError is a subclass
    except ImportError:  # pragma: no cover - openai is a hard dependency
        pass
    try:
        from voyageai import error as voyage_error

        types += [voyage_error.APIConnectionError, voyage_error.Timeout, voyage_error.TryAgain]
    except ImportError:  # pragma: no cover - voyageai is a hard dependency
        pass
    return tuple(types)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status carried by an exception from openai, voyageai or ProviderHTTPError."""
    for attr in ("status", "status_code", "http_status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def headers_of(exc: BaseException) -> Mapping[str, str] | None:
    """Response headers of an exception: ``.response.headers`` (openai) or ``.headers``."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        headers = getattr(exc, "headers", None)
    return headers if headers is not None and hasattr(headers, "items") else None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup that works on dicts, httpx and requests headers."""
    name = name.lower()
    for key, value in headers.items():
        if str(key).lower() == name:
            return str(value)
    return None


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: datetime | None = None
) -> float | None:
    """Server-requested delay from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    raw = _header(headers, "retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def is_retryable(exc: BaseException) -> bool:
    """True for rate limits, server errors, timeouts and connection failures."""
    status = status_of(exc)
    if status is not None:
        return status in RETRYABLE_STATUSES or 500 <= status <= 599
    return isinstance(exc, _connection_error_types())


def is_input_error(exc: BaseException) -> bool:
    """True when the request itself was rejected in a way one bad input can cause."""
    return status_of(exc) in INPUT_ERROR_STATUSES


def backoff_delay(
    attempt: int,
    *,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    rng: random.Random | None = None,
) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, capped at max_delay.

    ``attempt`` is 1 for the first retry. Pass a seeded ``random.Random`` for reproducible delays.
    """
    ceiling = min(max_delay, base_delay * (2.0 ** (attempt - 1)))
    r = (rng or random).random()
    return ceiling / 2.0 + r * ceiling / 2.0


def call_with_retries(
    fn: Callable[[], T],
    *,
    max_attempts: int = 6,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    sleep: Callable[[float], Any] = time.sleep,
    on_retry: Callable[[int, BaseException, float], Any] | None = None,
    rng: random.Random | None = None,
) -> T:
    """Call ``fn()`` until it succeeds, retrying transient failures only.

    ``Retry-After`` from the error's response wins over the computed backoff (capped at
    ``max_delay``). ``on_retry(attempt, exc, delay)`` is called before each sleep. The last
    error is re-raised once ``max_attempts`` calls have failed; permanent errors at once.
    """
    if max_attempts < 1:
        raise ValueError("max_attempts must be >= 1")
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:
            if attempt >= max_attempts or not is_retryable(exc):
                raise
            server_delay = retry_after_seconds(headers_of(exc))
            if server_delay is not None:
                delay = min(server_delay, max_delay)
            else:
                delay = backoff_delay(attempt, base_delay=base_delay, max_delay=max_delay, rng=rng)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            sleep(delay)
