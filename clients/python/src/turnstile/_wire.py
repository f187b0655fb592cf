"""What travels on the wire: service addresses, Connect's JSON framing,
durations and lock kinds as the service's JSON spells them."""

from __future__ import annotations

import datetime
import json
import struct
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

DEFAULT_PORT = 7070

# A message larger than this is refused before it is read: every message of
# the service is small, and a length this large means a stream out of step.
MAX_MESSAGE = 4 << 20

FLAG_COMPRESSED = 0x01
FLAG_END_STREAM = 0x02

Seconds = Union[int, float, datetime.timedelta]

KINDS = {
    "lock": "KIND_LOCK",
    "shared": "KIND_SHARED",
    "exclusive": "KIND_EXCLUSIVE",
    "semaphore": "KIND_SEMAPHORE",
    "fair": "KIND_FAIR",
}
_KIND_NAMES = {v: k for k, v in KINDS.items()}


class Address(NamedTuple):
    """One instance of the service."""

    scheme: str  # "http" or "https"
    host: str  # without brackets
    port: int
    prefix: str  # a path prefix before /turnstile.v1..., "" for none

    @property
    def name(self) -> str:
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s:%d" % (host, self.port)

    def __str__(self) -> str:
        return "%s://%s%s" % (self.scheme, self.name, self.prefix)


def parse_addresses(urls: Union[str, Sequence[str]]) -> List[Address]:
    """The instances a client may call: one URL, a URL naming several hosts
    ("http://h1:7070,h2:7070"), or a list of URLs. Errors never quote a URL's
    user information."""
    if isinstance(urls, str):
        urls = [urls]
    if not urls:
        raise ValueError("turnstile: no service address: want a URL such as http://127.0.0.1:7070")
    out: List[Address] = []
    for url in urls:
        if not isinstance(url, str):
            raise TypeError("turnstile: a service address must be a str, got %s" % type(url).__name__)
        out.extend(_parse_url(url.strip()))
    return out


def _parse_url(url: str) -> List[Address]:
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError("turnstile: service address %r: want http://host:port or https://host:port" % _clip(url))
    scheme = scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("turnstile: service address scheme %r: want http or https" % _clip(scheme))
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        raise ValueError(
            "turnstile: a service address must not carry user information; give the bearer token as token=")
    parts = urlsplit("%s://x/%s" % (scheme, path))
    if parts.query or parts.fragment or "?" in netloc or "#" in netloc:
        raise ValueError("turnstile: service address %s: no query or fragment, please" % scheme)
    prefix = ("/" + parts.path.strip("/")) if parts.path.strip("/") else ""
    hosts = [h.strip() for h in netloc.split(",")]
    if not hosts or any(not h for h in hosts):
        raise ValueError("turnstile: service address %s://%s: empty host" % (scheme, _clip(netloc)))
    return [Address(scheme, *_host_port(h), prefix) for h in hosts]


def _host_port(hostport: str) -> Tuple[str, int]:
    host, port = hostport, ""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise ValueError("turnstile: host %r: unclosed [" % _clip(hostport))
        host, tail = hostport[1:end], hostport[end + 1:]
        if tail:
            if not tail.startswith(":"):
                raise ValueError("turnstile: host %r: want [addr]:port" % _clip(hostport))
            port = tail[1:]
    elif hostport.count(":") == 1:
        host, port = hostport.split(":")
    elif ":" in hostport:
        raise ValueError("turnstile: host %r: write an IPv6 address in brackets, [addr]:port" % _clip(hostport))
    if not host:
        raise ValueError("turnstile: host %r: empty host name" % _clip(hostport))
    if port == "" and hostport.endswith(":"):
        raise ValueError("turnstile: host %r: empty port" % _clip(hostport))
    if port == "":
        return host, DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("turnstile: host %r: port must be 1 to 65535" % _clip(hostport))
    return host, int(port)


def _clip(s: str, n: int = 64) -> str:
    return s if len(s) <= n else s[:n] + "..."


def seconds(value: Optional[Seconds], what: str) -> Optional[float]:
    """value in seconds (a number or a timedelta), None kept."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("turnstile: %s must be seconds (a number or a timedelta), got %s" % (what, type(value).__name__))
    if value != value or value < 0 or value == float("inf"):
        raise ValueError("turnstile: %s must be a finite number of seconds, at least 0, got %r" % (what, value))
    return float(value)


def duration(secs: float) -> str:
    """A protobuf Duration in JSON: "1.5s"."""
    text = ("%.9f" % secs).rstrip("0").rstrip(".")
    return text + "s"


def parse_duration(text: object) -> float:
    if not isinstance(text, str) or not text.endswith("s"):
        raise ValueError("turnstile: the service sent a malformed duration")
    return float(text[:-1])


def kind_of(kind: str, permits: int) -> Tuple[str, int]:
    """The kind's JSON name and the permits to send, checked."""
    if not isinstance(kind, str) or kind.lower() not in KINDS:
        raise ValueError("turnstile: lock kind %r: want one of %s" % (kind, ", ".join(sorted(KINDS))))
    kind = kind.lower()
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise TypeError("turnstile: permits must be an int")
    if kind == "semaphore":
        if not 1 <= permits <= 1 << 16:
            raise ValueError("turnstile: a semaphore needs permits from 1 to 65536, got %d" % permits)
    elif permits:
        raise ValueError("turnstile: permits given for a %s lock: only a semaphore has permits" % kind)
    return KINDS[kind], permits


def kind_name(wire: Optional[str]) -> str:
    """The client's name of a kind the service names ("KIND_SHARED": "shared")."""
    wire = wire or "KIND_LOCK"
    return _KIND_NAMES.get(wire) or wire.lower().replace("kind_", "", 1)


def frame(message: dict) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode()
    return struct.pack(">BI", 0, len(data)) + data


def uint(value: object) -> int:
    """A uint64 field: a decimal string in JSON (0 when absent)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError("turnstile: the service sent a malformed number")
    return int(value)
