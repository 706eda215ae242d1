"""An engine's URL: checked where a user gives one, and its base (what ``/metrics``, ``/sim/*`` and
``/v1/*`` hang off). Every layer that talks to an engine shares these two rules."""

from __future__ import annotations

from urllib.parse import urlsplit

from ._exceptions import ConfigError

__all__ = ["check_engine_url", "engine_base_url"]


def check_engine_url(url: str, what: str = "engine URL") -> str:
    """An http(s) URL with a host and, if it names one, a port in 1-65535: else `ConfigError`
    naming ``what`` (an out-of-range port is refused, never wrapped onto another)."""
    text = url.strip()
    example = "expected e.g. http://127.0.0.1:8011"
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # an unclosed [ of an IPv6 address
        raise ConfigError(f"{what} {url!r}: {exc}; {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{what} {url!r}: not an http:// or https:// URL with a host; {example}")
    netloc = parts.netloc.rpartition("@")[2]
    _, colon, port = netloc.rpartition(":") if not netloc.endswith("]") else ("", "", "")
    if colon and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ConfigError(f"{what} {url!r}: port {port!r} is not a number from 1 to 65535")
    return text


def engine_base_url(url: str) -> str:
    """An engine's base URL (what ``/metrics``, ``/sim/*`` and ``/v1/*`` hang off), given it or its
    OpenAI ``/v1`` URL."""
    return url.strip().rstrip("/").removesuffix("/v1")
