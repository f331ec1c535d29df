"""PROF-4: the endpoint policy, table-driven over hostile URLs, and the pinned transport."""

from __future__ import annotations

import ipaddress

import pytest
from tests.support.model_server import FakeModelServer

from chatmem.errors import EndpointNotAllowed
from chatmem.models.client import ModelClient, ModelEndpoint
from chatmem.security.endpoints import (
    EndpointPolicy,
    StaticResolver,
    address_refusal,
    embedded_ipv4,
    parse_allowed_endpoints,
)
from chatmem.security.network import safe_async_client

# A test resolver: public-looking names, names that point inside, and cloud metadata.
RESOLVER = StaticResolver(
    {
        "api.public.test": ["93.184.216.34"],
        "api6.public.test": ["2606:2800:220:1:248:1893:25c8:1946"],
        "metadata.google.internal": ["169.254.169.254"],
        "metadata.aws.test": ["169.254.169.254"],
        "metadata6.aws.test": ["fd00:ec2::254"],
        "intranet.test": ["10.0.0.7"],
        "router.test": ["192.168.1.1"],
        "docker.test": ["172.17.0.1"],
        "cgnat.test": ["100.64.0.1"],
        "loop.test": ["127.0.0.1"],
        "loop6.test": ["::1"],
        "zero.test": ["0.0.0.0"],
        "mixed.test": ["93.184.216.34", "10.0.0.1"],  # ANY private address refuses
        "mapped.test": ["::ffff:127.0.0.1"],
        "mapped-meta.test": ["::ffff:169.254.169.254"],
        "nat64.test": ["64:ff9b::a00:1"],  # 10.0.0.1 via NAT64
        "sixtofour.test": ["2002:c0a8:0101::1"],  # 192.168.1.1 via 6to4
        "teredo.test": ["2001:0:4136:e378:8000:63bf:80ff:fffe"],  # Teredo, client 127.0.0.1
        "ula.test": ["fd12:3456:789a::1"],
        "linklocal6.test": ["fe80::1"],
        "multicast.test": ["224.0.0.251"],
        "multicast6.test": ["ff02::1"],
        "broadcast.test": ["255.255.255.255"],
        "reserved.test": ["240.0.0.1"],
        "docs.test": ["192.0.2.10"],
        "docs6.test": ["2001:db8::1"],
        "bench.test": ["198.18.0.1"],
        "sitelocal.test": ["fec0::1"],
        "v4compat.test": ["::7f00:1"],
    }
)
POLICY = EndpointPolicy(resolver=RESOLVER)

HOSTILE = [
    # scheme and form
    "http://api.public.test/v1",
    "ftp://api.public.test/",
    "file:///etc/passwd",
    "gopher://api.public.test/",
    "api.public.test/v1",
    "https:///v1",
    "",
    "https://api.public.test\\@127.0.0.1/",
    "https://api.public.test /v1",
    # user-info tricks
    "https://good.com@127.0.0.1/",
    "https://api.public.test@intranet.test/",
    "https://user:pass@api.public.test/v1",
    "https://api.public.test:443@169.254.169.254/",
    # IP literals, canonical and legacy
    "https://127.0.0.1/v1",
    "https://93.184.216.34/v1",  # even a public IP: a DNS name is required
    "https://2130706433/",
    "https://0177.0.0.1/",
    "https://0x7f.1/",
    "https://0x7f000001/",
    "https://127.1/",
    "https://127.0.1/",
    "https://[::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[0:0:0:0:0:ffff:127.0.0.1]/",
    "https://[fe80::1%25eth0]/",
    "https://169.254.169.254/latest/meta-data/",
    "https://[fd00:ec2::254]/",
    "https://0.0.0.0/",
    # local-only names
    "https://localhost/v1",
    "https://localhost./v1",
    "https://LOCALHOST/v1",
    "https://api.localhost/v1",
    "https://printer.local/",
    # names the resolver maps inside
    "https://metadata.google.internal/computeMetadata/v1/",
    "https://metadata.aws.test/latest/",
    "https://metadata6.aws.test/latest/",
    "https://intranet.test/v1",
    "https://router.test/",
    "https://docker.test/",
    "https://cgnat.test/",
    "https://loop.test/",
    "https://loop6.test/",
    "https://zero.test/",
    "https://mixed.test/",
    "https://mapped.test/",
    "https://mapped-meta.test/",
    "https://nat64.test/",
    "https://sixtofour.test/",
    "https://teredo.test/",
    "https://ula.test/",
    "https://linklocal6.test/",
    "https://multicast.test/",
    "https://multicast6.test/",
    "https://broadcast.test/",
    "https://reserved.test/",
    "https://docs.test/",
    "https://docs6.test/",
    "https://bench.test/",
    "https://sitelocal.test/",
    "https://v4compat.test/",
    # encodings and odd forms
    "https://%6c%6fcalhost/",
    "https://127。0。0。1/",
    "https://LOCALHOST%2e/",
    "https://0/",
    "https://[::]/",
    "https://localhost%00.api.public.test/",
    "https://api.public.test:0/",
    "https://api.public.test:99999/",
    # DNS failure refuses
    "https://does-not-resolve.test/v1",
    "https://bad_label.test/",
    "https://-leading-dash.test/",
]


def test_the_hostile_table_is_large_enough() -> None:
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_url_is_refused(url: str) -> None:
    """PROF-4: every hostile URL is refused with endpoint_not_allowed."""
    with pytest.raises(EndpointNotAllowed) as info:
        POLICY.check_url(url)
    assert info.value.code == "endpoint_not_allowed"


@pytest.mark.parametrize(
    "url",
    [
        "https://api.public.test/v1",
        "https://API.PUBLIC.TEST./v1",
        "https://api6.public.test:8443/v1",
    ],
)
def test_public_https_names_are_accepted(url: str) -> None:
    checked = POLICY.check_url(url)
    assert checked.addresses


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.1.1", "private"),
        ("100.127.255.255", "carrier-grade NAT"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::7f00:1", "loopback"),
        ("2002:7f00:1::", "loopback"),
        ("fd00:ec2::254", "cloud metadata"),
        ("fd00:ec3::254", "unique local (private)"),
        ("100.100.100.200", "cloud metadata"),
        ("192.0.0.192", "cloud metadata"),
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("64:ff9b::808:808", None),  # NAT64 of a public address
    ],
)
def test_address_policy(address: str, reason: str | None) -> None:
    why = address_refusal(ipaddress.ip_address(address))
    kind = why.split(" (embedded")[0] if why else None
    if kind and kind.startswith("cloud metadata"):
        kind = "cloud metadata"
    assert kind == reason


def test_embedded_ipv4_forms() -> None:
    forms = ["::ffff:1.2.3.4", "64:ff9b::102:304", "2002:102:304::1", "::102:304"]
    assert {str(embedded_ipv4(ipaddress.IPv6Address(f))) for f in forms} == {"1.2.3.4"}


# --- opt-ins -------------------------------------------------------------------------------------


def test_private_opt_in_admits_http_loopback_and_private_names() -> None:
    resolver = StaticResolver({**RESOLVER.answers, "localhost": ["127.0.0.1", "::1"]})
    policy = EndpointPolicy(allow_private=True, resolver=resolver)
    for url in (
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434/v1",
        "https://intranet.test/v1",
        "http://[::1]:8000/v1",
        "https://mixed.test/",
    ):
        policy.check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://metadata.google.internal/",  # link-local metadata stays refused
        "https://multicast.test/",
        "https://0.0.0.0/",
        "https://0177.0.0.1/",  # ambiguous numeric forms never
        "https://good.com@127.0.0.1/",
        "https://does-not-resolve.test/",
    ],
)
def test_private_opt_in_still_refuses(url: str) -> None:
    with pytest.raises(EndpointNotAllowed):
        EndpointPolicy(allow_private=True, resolver=RESOLVER).check_url(url)


# SEC-5: every cloud's metadata service, in IPv4, IPv6, embedded and named forms.
METADATA_RESOLVER = StaticResolver(
    {
        "metadata.google.internal": ["169.254.169.254"],  # GCP
        "metadata.goog": ["169.254.169.254"],
        "gw.aws.test": ["169.254.169.254"],  # AWS, Azure, Oracle, OpenStack, DigitalOcean
        "gw6.aws.test": ["fd00:ec2::254"],  # AWS IMDS over IPv6 (Nitro)
        "pod-identity.aws.test": ["fd00:ec2::23"],  # EKS pod identity agent
        "ecs.aws.test": ["169.254.170.2"],  # ECS task credentials
        "alibaba.test": ["100.100.100.200"],  # Alibaba Cloud
        "oracle.test": ["192.0.0.192"],  # Oracle Cloud (legacy)
        "azure-wire.test": ["168.63.129.16"],  # Azure WireServer
        "tencent.test": ["169.254.0.23"],  # Tencent Cloud
        "mapped-alibaba.test": ["::ffff:100.100.100.200"],
        "nat64-metadata.test": ["64:ff9b::a9fe:a9fe"],  # 169.254.169.254 via NAT64
        "mixed-metadata.test": ["10.0.0.5", "100.100.100.200"],
        "linklocal.test": ["169.254.10.10"],
        # Private look-alikes that are not metadata stay admitted with the opt-in.
        "cgnat.test": ["100.100.100.201"],
        "ula.test": ["fd00:ec3::254"],
        "ietf.test": ["192.0.0.10"],
    }
)
METADATA_URLS = [
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata.goog/",
    "http://metadata/",
    "http://instance-data/latest/meta-data/",
    "http://gw.aws.test/latest/meta-data/",
    "http://gw6.aws.test/latest/meta-data/",
    "http://pod-identity.aws.test/",
    "http://ecs.aws.test/v2/credentials",
    "http://alibaba.test/latest/meta-data/",
    "http://oracle.test/opc/v1/instance/",
    "http://azure-wire.test/machine?comp=goalstate",
    "http://tencent.test/latest/meta-data/",
    "http://mapped-alibaba.test/",
    "http://nat64-metadata.test/",
    "http://mixed-metadata.test/",
    "http://linklocal.test/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://192.0.0.192/opc/v1/",
    "http://[::ffff:169.254.169.254]/",
    "http://[fe80::1]/",
]


@pytest.mark.parametrize("url", METADATA_URLS)
def test_private_opt_in_never_admits_cloud_metadata(url: str) -> None:
    policy = EndpointPolicy(allow_private=True, resolver=METADATA_RESOLVER)
    with pytest.raises(EndpointNotAllowed):
        policy.check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254:80/",
        "http://[fd00:ec2::254]:80/",
        "http://100.100.100.200:80/",
        "http://metadata.google.internal:80/",
        "http://gw.aws.test:80/",
    ],
)
def test_even_an_explicit_allow_list_entry_never_admits_cloud_metadata(url: str) -> None:
    host = url.split("//", 1)[1].rsplit(":", 1)[0].strip("[]")
    policy = EndpointPolicy(
        allow_private=True,
        allowed=parse_allowed_endpoints(f"[{host}]:80" if ":" in host else f"{host}:80"),
        resolver=METADATA_RESOLVER,
    )
    with pytest.raises(EndpointNotAllowed):
        policy.check_url(url)


def test_private_opt_in_admits_neighbours_of_metadata_addresses() -> None:
    policy = EndpointPolicy(allow_private=True, resolver=METADATA_RESOLVER)
    for url in ("http://cgnat.test/v1", "http://ula.test/v1", "http://ietf.test/v1"):
        policy.check_url(url)
    # A listed link-local host:port stays the operator's explicit choice.
    listed = EndpointPolicy(
        allowed=parse_allowed_endpoints("linklocal.test:80"), resolver=METADATA_RESOLVER
    )
    listed.check_url("http://linklocal.test/v1")


async def test_metadata_is_refused_at_connect_time_with_private_endpoints_allowed() -> None:
    """Rebinding to metadata after the save check is refused by the pinned transport."""
    resolver = StaticResolver({"gw.test": ["10.0.0.9"]})
    policy = EndpointPolicy(allow_private=True, resolver=resolver)
    policy.check_url("http://gw.test/v1")
    for address in ("100.100.100.200", "fd00:ec2::254", "169.254.169.254"):
        resolver.answers["gw.test"] = [address]
        async with safe_async_client(policy, timeout=2) as client:
            with pytest.raises(EndpointNotAllowed):
                await client.get("http://gw.test/v1/models")


def test_allow_list_admits_exactly_the_listed_host_and_port() -> None:
    policy = EndpointPolicy(
        allowed=parse_allowed_endpoints("intranet.test:8443, 10.9.9.9:80"), resolver=RESOLVER
    )
    policy.check_url("http://intranet.test:8443/v1")
    policy.check_url("http://10.9.9.9/v1")
    for url in ("https://intranet.test/v1", "http://intranet.test:8444/", "https://router.test/"):
        with pytest.raises(EndpointNotAllowed):
            policy.check_url(url)


def test_allow_list_syntax_errors_are_configuration_errors() -> None:
    from chatmem.errors import ConfigurationError
    from chatmem.settings import Settings

    with pytest.raises(ConfigurationError):
        EndpointPolicy.from_settings(Settings(allowed_endpoints="intranet.test"))


# --- at connect time -----------------------------------------------------------------------------


async def test_transport_refuses_a_hostile_url_without_connecting(
    model_server: FakeModelServer,
) -> None:
    """The transport re-checks every request URL, not only the saved one."""
    async with safe_async_client(POLICY) as client:
        for url in (
            f"http://127.0.0.1:{model_server.port}/v1/models",
            "https://loop.test/v1/models",
            "https://does-not-resolve.test/",
        ):
            with pytest.raises(EndpointNotAllowed):
                await client.get(url)
    assert model_server.requests == []


async def test_public_looking_host_that_redirects_inside_is_refused(
    model_server: FakeModelServer,
) -> None:
    """PROF-4: a trusted, reachable host answers 302 to the metadata service: not followed."""
    resolver = StaticResolver({"gateway.test": ["127.0.0.1"]})
    policy = EndpointPolicy(
        allowed=frozenset({("gateway.test", model_server.port)}), resolver=resolver
    )
    model_server.redirect("http://169.254.169.254/latest/meta-data/iam/")
    url = f"http://gateway.test:{model_server.port}/v1"
    async with ModelClient(ModelEndpoint(url, "m"), policy) as client:
        with pytest.raises(EndpointNotAllowed, match="redirect"):
            async for _ in client.stream([{"role": "user", "content": "hi"}]):
                pass
    assert len(model_server.requests) == 1
    assert resolver.calls == ["gateway.test"]


async def test_proxy_environment_variables_are_ignored(
    model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PROF-4: HTTPS_PROXY / ALL_PROXY pointing elsewhere change nothing."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: would fail
    policy = EndpointPolicy(allow_private=True)
    async with ModelClient(ModelEndpoint(model_server.base_url, "m"), policy) as client:
        assert await client.list_models()


# --- TLS is verified against the host name while the checked IP is dialled ------------------------


def _self_signed(tmp_path: object, name: str) -> tuple[str, str]:
    import datetime as dt
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    base = Path(str(tmp_path))
    cert_path, key_path = base / "cert.pem", base / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


async def test_tls_is_verified_against_the_name_not_the_pinned_address(tmp_path: object) -> None:
    import ssl

    from chatmem.errors import ProviderError

    cert, key = _self_signed(tmp_path, "models.tls.test")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=cert)
    resolver = StaticResolver(
        {"models.tls.test": ["127.0.0.1"], "impostor.tls.test": ["127.0.0.1"]}
    )
    policy = EndpointPolicy(allow_private=True, resolver=resolver)
    with FakeModelServer(ssl_context=server_ctx) as server:
        good = ModelEndpoint(f"https://models.tls.test:{server.port}/v1", "m")
        async with ModelClient(good, policy, ssl_context=client_ctx) as client:
            assert await client.list_models()
        # Same address, a name the certificate does not cover: the handshake must fail.
        bad = ModelEndpoint(f"https://impostor.tls.test:{server.port}/v1", "m")
        async with ModelClient(bad, policy, ssl_context=client_ctx) as client:
            with pytest.raises(ProviderError):
                await client.list_models()
