"""Where medflows may send a request on a submitter's behalf: the one rule for ``api_base``.

A registered endpoint's base URL comes from a submitter, so it is checked before it is stored
(``POST /v1/endpoints``, the CLI) and again before every call (a host name may resolve elsewhere
by then). The rule:

* ``http`` or ``https`` only, at most :data:`MAX_URL_CHARS` characters, no user info
  (``user:pass@``), no whitespace or control characters, a host and a valid port (1–65535);
* every address the host is (a literal IP) or resolves to (``socket.getaddrinfo``, bounded by
  :data:`RESOLVE_TIMEOUT_S`) must be a public unicast address: loopback, link-local (cloud
  metadata at 169.254.169.254), private (RFC 1918, ULA ``fc00::/7``), shared (100.64/10),
  unspecified, multicast, documentation and reserved addresses are refused, also inside an
  IPv4-mapped, 6to4 or Teredo IPv6 address. A name that does not resolve is refused.

The operator opens networks with the ``MEDFLOWS_ENDPOINT_ALLOW_NETWORKS`` setting (CIDRs, e.g.
``127.0.0.1/32`` for a local test server or ``10.20.0.0/16`` for an on-premises model farm);
an address inside one of them passes. The check cannot stop a host that resolves differently
between this check and the client's own lookup; put an egress proxy in front of the service
when that matters.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from urllib.parse import SplitResult, urlsplit

from tasks_lib.errors import InputDataError

MAX_URL_CHARS = 2048
"""Longest base URL accepted."""
RESOLVE_TIMEOUT_S = 5.0
"""Longest wait for a host name to resolve (longer: refused)."""
SCHEMES = ("http", "https")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_RESOLVER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="netpolicy-resolve")


class RefusedEndpoint(InputDataError):
    """An ``api_base`` the policy refuses (the submitter's mistake, or a hostile one)."""


def networks(entries: Sequence[str]) -> list[Network]:
    """Parsed allow-list entries (an entry that is no CIDR is the operator's mistake)."""
    out: list[Network] = []
    for entry in entries:
        try:
            out.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise InputDataError("MEDFLOWS_ENDPOINT_ALLOW_NETWORKS",
                                 f"{entry!r} is not an IP network (CIDR)") from None
    return out


def _embedded(addr: Address) -> list[Address]:
    """``addr`` and the IPv4 addresses an IPv6 address carries (mapped, 6to4, Teredo)."""
    found: list[Address] = [addr]
    if isinstance(addr, ipaddress.IPv6Address):
        teredo = addr.teredo
        found += [a for a in (addr.ipv4_mapped, addr.sixtofour, teredo[1] if teredo else None)
                  if a is not None]
    return found


def why_not_public(addr: Address) -> str | None:
    """What makes ``addr`` no public unicast address (None: it is one)."""
    for a in _embedded(addr):
        for kind, hit in (("loopback", a.is_loopback), ("link-local", a.is_link_local),
                          ("unspecified", a.is_unspecified), ("multicast", a.is_multicast),
                          ("private", a.is_private), ("reserved", a.is_reserved),
                          ("not globally routable", not a.is_global)):
            if hit:
                return f"{kind} address {a}"
    return None


def _resolve(host: str, port: int) -> list[Address]:
    future = _RESOLVER.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = future.result(timeout=RESOLVE_TIMEOUT_S)
    except FutureTimeout:
        raise RefusedEndpoint("api_base", f"host {host!r} did not resolve within "
                                          f"{RESOLVE_TIMEOUT_S:g} s") from None
    except (OSError, UnicodeError) as exc:
        raise RefusedEndpoint("api_base", f"host {host!r} does not resolve ({exc})") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _parts(url: str) -> tuple[SplitResult, str, int]:
    if len(url) > MAX_URL_CHARS:
        raise RefusedEndpoint("api_base", f"longer than {MAX_URL_CHARS} characters")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise RefusedEndpoint("api_base", "contains whitespace or control characters")
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise RefusedEndpoint("api_base", f"scheme {parts.scheme or '(none)'!r} refused: "
                                          "http or https only")
    if "@" in parts.netloc:
        raise RefusedEndpoint("api_base", "user info (user:password@) refused: give the "
                                          "credential as api_key")
    try:
        port = parts.port
    except ValueError as exc:
        raise RefusedEndpoint("api_base", f"bad port ({exc})") from None
    if port == 0:
        raise RefusedEndpoint("api_base", "bad port 0")
    host = parts.hostname
    if not host:
        raise RefusedEndpoint("api_base", "no host")
    return parts, host, port or (443 if parts.scheme.lower() == "https" else 80)


def check_api_base(url: str, allow: Sequence[str] | None = None) -> str:
    """``url`` when the policy (module docstring) lets medflows call it.

    Args:
        url: A base URL given by a submitter.
        allow: CIDRs the operator opened (default: the ``endpoint_allow_networks`` setting).

    Raises:
        RefusedEndpoint: With the reason (an ``InputDataError`` on the field ``api_base``).
    """
    if allow is None:
        from tasks_lib.settings import get_settings

        allow = get_settings().endpoint_allow_networks
    opened = networks(allow)
    _, host, port = _parts(url)
    try:
        addresses: list[Address] = [ipaddress.ip_address(host)]
    except ValueError:
        addresses = _resolve(host, port)
    if not addresses:
        raise RefusedEndpoint("api_base", f"host {host!r} resolves to no address")
    for addr in addresses:
        reason = why_not_public(addr)
        if reason is not None and not any(addr in net for net in opened):
            what = "" if host == str(addr) else "resolves to "
            raise RefusedEndpoint("api_base", f"host {host!r}: {what}{reason}, refused (the "
                                              "operator may open it with "
                                              "MEDFLOWS_ENDPOINT_ALLOW_NETWORKS)")
    return url
