"""The endpoint policy (PROF-4): which model and MCP URLs chatmem may connect to, and how.

Theory of operation
-------------------
A model URL is the easiest way into an internal network, so every outgoing connection to a
user-supplied URL goes through one :class:`EndpointPolicy`, applied twice:

1. **When a profile (or MCP server) is saved** — :meth:`EndpointPolicy.check_url` parses the
   URL, checks its form and resolves the host name once, refusing if *any* address is not a
   public unicast address.  The user gets ``endpoint_not_allowed`` immediately.
2. **Every time a connection is opened** — the pinned network backend of
   :mod:`chatmem.security.network` (under the model client and the MCP links alike)
   resolves the name again through the same policy and connects to *the address it just
   checked* (never letting the OS resolve a second time), while TLS is still verified against
   the host name.  A name that rebinds to a private address between save and use is therefore
   refused at connect time, and nothing else can slip in between the check and the connect.

Rules, by default:

* only ``https``; no user-info (``https://good.com@127.0.0.1``); a DNS host name, never an
  IP literal — including the legacy forms ``inet_aton`` accepts (``2130706433``,
  ``0177.0.0.1``, ``0x7f.1``, ``127.1``); ``localhost`` and other local-only names refused;
* every resolved address must be global unicast: :data:`BLOCKED_V4` / :data:`BLOCKED_V6` list
  the refused ranges as data (loopback, private, link-local, CGNAT, multicast, unspecified,
  reserved, documentation, benchmarking, ULA, …).  IPv6 addresses that embed an IPv4 address
  (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64) are judged by that IPv4 address too;
* a DNS failure refuses; redirects are never followed (the client treats 3xx as refused);
  proxy environment variables are ignored (``trust_env=False``).

Operators opt in for trusted internal gateways with ``CHATMEM_ALLOW_PRIVATE_ENDPOINTS=1``
(everything private, loopback and plain http; link-local, multicast and unspecified addresses
stay refused) or ``CHATMEM_ALLOWED_ENDPOINTS=host:port,…`` (exactly those, with any address
and http).  Non-canonical IP literals and user-info are refused even then, and so are cloud
metadata services (SEC-5: :data:`METADATA_V4` / :data:`METADATA_V6` / :data:`METADATA_NAMES` —
AWS ``169.254.169.254`` and ``fd00:ec2::254``, GCP ``metadata.google.internal``, Azure,
Alibaba ``100.100.100.200``, Oracle ``192.0.0.192``, …), whatever the opt-ins.

Name resolution is a :class:`Resolver` so tests map names to chosen addresses without DNS.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from chatmem.errors import ConfigurationError, EndpointNotAllowed

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


# --- address policy, as data ------------------------------------------------------------------


def _nets(
    pairs: Iterable[tuple[str, str]],
) -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in pairs)


#: Cloud instance-metadata services (SEC-5): refused whatever the opt-ins, even for a listed
#: host:port — they hand out the machine's credentials.  Checked before the tables below,
#: where most of them sit inside ranges the private-endpoint opt-in admits (CGNAT, ULA, …).
METADATA_V4 = _nets(
    [
        ("169.254.169.254/32", "cloud metadata (AWS, GCP, Azure, Oracle, OpenStack, …)"),
        ("169.254.170.2/32", "cloud metadata (AWS ECS task credentials)"),
        ("169.254.170.23/32", "cloud metadata (AWS EKS pod identity)"),
        ("169.254.0.23/32", "cloud metadata (Tencent Cloud)"),
        ("100.100.100.200/32", "cloud metadata (Alibaba Cloud)"),
        ("192.0.0.192/32", "cloud metadata (Oracle Cloud)"),
        ("168.63.129.16/32", "cloud metadata (Azure WireServer)"),
    ]
)
METADATA_V6 = _nets(
    [
        # AWS Nitro: IMDS fd00:ec2::254, EKS pod identity fd00:ec2::23, DNS, NTP.
        ("fd00:ec2::/64", "cloud metadata (AWS IPv6)"),
    ]
)
#: Names of metadata services, refused before any resolution (SEC-5).
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.azure.internal",
    }
)

BLOCKED_V4 = _nets(
    [
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "carrier-grade NAT"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # includes 255.255.255.255 broadcast
    ]
)

BLOCKED_V6 = _nets(
    [
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/8", "reserved (incl. IPv4-mapped and IPv4-compatible)"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/23", "IETF protocol assignments (incl. Teredo, benchmarking)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing"),
        ("fc00::/7", "unique local (private)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    ]
)

# Still refused when private endpoints are allowed: instance metadata lives on link-local
# addresses, and multicast/unspecified are never a model API.  Only an explicit host:port
# entry admits these kinds — except cloud metadata, which nothing admits.
ALWAYS_BLOCKED_KINDS = frozenset({"unspecified", "link-local", "multicast", "cloud metadata"})
NEVER_ADMITTED_KINDS = frozenset({"cloud metadata"})

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_COMPAT = ipaddress.ip_network("::/96")

# Names that only ever mean "this machine" or a local network.
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_LOCAL_SUFFIXES = (".localhost", ".local", ".localdomain", ".internal", ".home.arpa")

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, for the forms that route to it."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64 or (ip in _V4_COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public unicast address, or ``None`` if it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            why = address_refusal(inner)
            if why is not None:
                return f"{why} (embedded in {ip})"
            if ip in _NAT64:  # carved out of ::/8: a NAT64 address is its IPv4 address
                return None
        table = METADATA_V6 + BLOCKED_V6
    else:
        table = METADATA_V4 + BLOCKED_V4
    for net, why in table:
        if ip in net:
            return why
    if not ip.is_global or ip.is_multicast:  # belt and braces over the table
        return "not a public address"
    return None


def _kind(reason: str) -> str:
    return reason.split(" (", 1)[0]


# --- resolvers -----------------------------------------------------------------------------


class Resolver(Protocol):
    """Turns a host name into addresses.  Raise ``OSError`` (or return []) when it fails."""

    def resolve(self, host: str, port: int) -> Sequence[str]: ...


class SystemResolver:
    """The operating system's resolver (``getaddrinfo``)."""

    def resolve(self, host: str, port: int) -> Sequence[str]:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        seen: list[str] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            addr = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
            if addr not in seen:
                seen.append(addr)
        return seen


@dataclass
class StaticResolver:
    """A resolver answering from a table (tests, or pinning names in a deployment).

    Unknown names fail like a DNS error.  Values may be a list of addresses; ``answers`` can be
    changed between calls (to simulate DNS rebinding).
    """

    answers: dict[str, list[str]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def resolve(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        try:
            return list(self.answers[host.lower().rstrip(".")])
        except KeyError:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None


# --- the policy --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A URL that passed the syntactic checks."""

    scheme: str
    host: str  # lower case, no trailing dot, IPv6 without brackets
    port: int
    trusted: bool  # on the operator's allow-list (or private endpoints allowed globally)
    ip_literal: bool


@dataclass(frozen=True)
class CheckedEndpoint:
    target: Target
    addresses: tuple[str, ...]


def parse_allowed_endpoints(text: str) -> frozenset[tuple[str, int]]:
    """``"gw.internal:8443,10.0.0.5:80"`` → {("gw.internal", 8443), ("10.0.0.5", 80)}."""
    out: set[tuple[str, int]] = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"allowed endpoint {item!r} is not host:port")
        out.add((host.strip("[]").lower().rstrip("."), int(port)))
    return frozenset(out)


@dataclass(frozen=True)
class EndpointPolicy:
    allow_private: bool = False
    allowed: frozenset[tuple[str, int]] = frozenset()
    resolver: Resolver = field(default_factory=SystemResolver, compare=False)

    @classmethod
    def from_settings(cls, settings: object, resolver: Resolver | None = None) -> EndpointPolicy:
        try:
            allowed = parse_allowed_endpoints(str(getattr(settings, "allowed_endpoints", "") or ""))
        except ValueError as exc:
            raise ConfigurationError(f"CHATMEM_ALLOWED_ENDPOINTS: {exc}") from None
        return cls(
            allow_private=bool(getattr(settings, "allow_private_endpoints", False)),
            allowed=allowed,
            resolver=resolver or SystemResolver(),
        )

    def is_trusted(self, host: str, port: int) -> bool:
        return self.allow_private or (host.lower().rstrip("."), port) in self.allowed

    # -- syntax ---------------------------------------------------------------------------
    def check_syntax(self, url: str) -> Target:
        """Check the form of ``url`` (no network).  Raises ``EndpointNotAllowed``."""
        if not isinstance(url, str) or not url or len(url) > 2048:
            raise _refuse(url, "not a URL")
        if any(ch.isspace() or ord(ch) < 0x20 or ch == "\\" for ch in url):
            raise _refuse(url, "the URL contains spaces, control characters or backslashes")
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, ValueError, TypeError):
            raise _refuse(url, "not a valid URL") from None
        scheme = parsed.scheme
        if scheme not in ("http", "https"):
            raise _refuse(url, "only https URLs are accepted")
        if parsed.userinfo:
            raise _refuse(url, "user names or passwords in the URL are not accepted")
        raw_host = parsed.raw_host.decode("ascii", "replace").lower()
        host = raw_host.strip("[]").rstrip(".")
        if not host:
            raise _refuse(url, "the URL has no host")
        port = parsed.port if parsed.port is not None else (443 if scheme == "https" else 80)
        if not 0 < port < 65536:
            raise _refuse(url, "the port is out of range")
        trusted = self.is_trusted(host, port)
        ip_literal = is_ip_literal(host)
        if ip_literal:
            try:
                ipaddress.ip_address(host)
            except ValueError:  # 0177.0.0.1, 0x7f.1, 127.1, 2130706433 …: never, they're ambiguous
                raise _refuse(url, "numeric host names are not accepted") from None
            if not trusted:
                raise _refuse(url, "IP addresses are not accepted; use a DNS host name")
        else:
            _check_dns_name(url, host)
            if host in METADATA_NAMES:
                raise _refuse(url, f"{host} is a cloud metadata service")
            if not trusted and (host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES)):
                raise _refuse(url, f"{host} is a local-only name")
        if scheme != "https" and not trusted:
            raise _refuse(
                url, "only https URLs are accepted (http needs the private-endpoint opt-in)"
            )
        return Target(scheme=scheme, host=host, port=port, trusted=trusted, ip_literal=ip_literal)

    # -- addresses ------------------------------------------------------------------------
    def checked_addresses(self, host: str, port: int) -> tuple[str, ...]:
        """Resolve ``host`` once and return its addresses, refusing if any is not allowed.

        Blocking (DNS); async callers run it in a worker thread.
        """
        host = host.lower().strip("[]").rstrip(".")
        if host in METADATA_NAMES:
            raise _refuse(host, f"{host} is a cloud metadata service")
        trusted = self.is_trusted(host, port)
        if is_ip_literal(host):
            try:
                raw = [str(ipaddress.ip_address(host))]
            except ValueError:
                raise _refuse(host, "numeric host names are not accepted") from None
        else:
            try:
                raw = list(self.resolver.resolve(host, port))
            except (OSError, UnicodeError):
                raise _refuse(host, f"the name {host} could not be resolved") from None
            if not raw:
                raise _refuse(host, f"the name {host} could not be resolved")
        out: list[str] = []
        for text in raw:
            try:
                ip = ipaddress.ip_address(text)
            except ValueError:
                raise _refuse(host, f"the name {host} resolved to a malformed address") from None
            why = address_refusal(ip)
            # Trust admits private addresses, but only an explicit host:port entry admits
            # link-local (metadata), multicast or unspecified ones.
            explicit = (host, port) in self.allowed
            if why is not None and (
                not trusted
                or (_kind(why) in ALWAYS_BLOCKED_KINDS and not explicit)
                or _kind(why) in NEVER_ADMITTED_KINDS
            ):
                raise _refuse(host, f"{host} resolves to a {why} address ({ip})")
            out.append(str(ip))
        return tuple(out)

    def check_url(self, url: str) -> CheckedEndpoint:
        """Everything checkable when a URL is saved: form, then every resolved address."""
        target = self.check_syntax(url)
        return CheckedEndpoint(target, self.checked_addresses(target.host, target.port))

    def concealed(self) -> EndpointPolicy:
        """The same policy, whose refusals name no host, URL or address: for a user of
        somebody else's shared profile, who may not see where it points (SEC-4)."""
        return _ConcealedPolicy(self.allow_private, self.allowed, self.resolver)


class _ConcealedPolicy(EndpointPolicy):
    def check_syntax(self, url: str) -> Target:
        try:
            return super().check_syntax(url)
        except EndpointNotAllowed:
            raise _concealed_refusal() from None

    def checked_addresses(self, host: str, port: int) -> tuple[str, ...]:
        try:
            return super().checked_addresses(host, port)
        except EndpointNotAllowed:
            raise _concealed_refusal() from None

    def concealed(self) -> EndpointPolicy:
        return self


def _concealed_refusal() -> EndpointNotAllowed:
    return EndpointNotAllowed(
        "This shared model's address is not allowed by this server's endpoint policy; "
        "ask an administrator.",
        reason="policy",
    )


def _refuse(url: object, why: str) -> EndpointNotAllowed:
    return EndpointNotAllowed(f"This endpoint is not allowed: {why}.", reason=why)


def is_ip_literal(host: str) -> bool:
    """True for anything the OS could read as an address, canonical or not."""
    if ":" in host:
        return True
    try:
        socket.inet_aton(host)  # accepts 2130706433, 0177.0.0.1, 0x7f.1, 127.1
        return True
    except (OSError, ValueError):
        pass
    last = host.rsplit(".", 1)[-1]
    return last.isdigit() or bool(re.fullmatch(r"0x[0-9a-f]*", last))


def _check_dns_name(url: str, host: str) -> None:
    if len(host) > 253 or not all(_LABEL.match(label) for label in host.split(".")):
        raise _refuse(url, "the host is not a valid DNS name")
