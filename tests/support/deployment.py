"""The committed deployment files on loopback (OPS-4): nginx from the system's package in front
of ``chatmem serve`` replicas, with ``deploy/chatmem.env``'s settings (:func:`env_values`).

:func:`render_site` takes the committed ``deploy/nginx/chatmem.conf`` and rewrites only what
the file names as machine-specific: the ``server`` lines of ``upstream chatmem`` (the
replicas' ports), the ``listen`` ports (IPv6 lines dropped: loopback IPv4 only) and the
certificate paths.  Each rewrite must find its lines, so a change of the file's shape fails
here instead of testing something else.  :class:`Nginx` runs it in the foreground under a
small main ``nginx.conf`` of its own (temporary paths, logs, pid in a temporary folder),
which adds one header for the tests: ``X-Chatmem-Upstream``, the replica(s) nginx used.
"""

from __future__ import annotations

import datetime
import getpass
import grp
import ipaddress
import os
import re
import shutil
import ssl
import subprocess
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from tests.support.ready import wait_ready
from tests.support.serve import ROOT, START_TIMEOUT, free_port, stop_process

SITE = ROOT / "deploy" / "nginx" / "chatmem.conf"
ENV_FILE = ROOT / "deploy" / "chatmem.env"
#: The response header the tests' main config adds: nginx's ``$upstream_addr``.
UPSTREAM_HEADER = "X-Chatmem-Upstream"

_UPSTREAM_BLOCK = re.compile(r"(upstream chatmem \{\n)(.*?)(\n\})", re.S)
_SERVER_LINE = re.compile(r"\s*server\s+\S+;.*")
_LISTEN = re.compile(r"^(\s*)listen\s+(\[::\]:)?(\d+)(.*);$", re.M)
_CERTIFICATE = re.compile(r"^(\s*)(ssl_certificate(?:_key)?)\s+\S+;$", re.M)


def env_values(text: str) -> dict[str, str]:
    """The variables an ``EnvironmentFile=`` sets (comment lines set nothing)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name: value for name, value in pairs}


def nginx_binary() -> str | None:
    """Debian's nginx (``apt-get install nginx``), on the PATH or in /usr/sbin."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def render_site(
    text: str, *, replicas: list[int], ports: dict[int, int], certificate: Path, key: Path
) -> str:
    """The committed site for loopback: ``replicas`` as the upstream's servers, each
    ``listen PORT`` on ``127.0.0.1:ports[PORT]``, the certificate and key given."""
    block = _UPSTREAM_BLOCK.search(text)
    assert block is not None, "no `upstream chatmem { … }` block"
    lines = block.group(2).split("\n")
    servers = [i for i, line in enumerate(lines) if _SERVER_LINE.fullmatch(line)]
    assert len(servers) >= 2, "the upstream should show two replicas or more"
    indent = lines[servers[0]][: len(lines[servers[0]]) - len(lines[servers[0]].lstrip())]
    ours = [f"{indent}server 127.0.0.1:{port};" for port in replicas]
    lines = (
        lines[: servers[0]]
        + ours
        + [line for i, line in enumerate(lines) if i > servers[0] and i not in servers]
    )
    text = text[: block.start(2)] + "\n".join(lines) + text[block.end(2) :]

    found = {int(match.group(3)) for match in _LISTEN.finditer(text)}
    assert found == set(ports), f"listen ports {sorted(found)}, expected {sorted(ports)}"

    def listen(match: re.Match[str]) -> str:
        indent, ipv6, port, rest = match.groups()
        if ipv6:
            return f"{indent}# (IPv6 listen dropped on loopback)"
        return f"{indent}listen 127.0.0.1:{ports[int(port)]}{rest};"

    text = _LISTEN.sub(listen, text)
    paths = {"ssl_certificate": certificate, "ssl_certificate_key": key}
    text, count = _CERTIFICATE.subn(
        lambda m: f"{m.group(1)}{m.group(2)} {paths[m.group(2)]};", text
    )
    assert count == 2, "expected ssl_certificate and ssl_certificate_key"
    return text


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, its own authority; (certificate, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "chatmem test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


_MAIN = """\
daemon off;
master_process on;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
{user}
events {{
    worker_connections 512;
}}
http {{
    default_type application/octet-stream;
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    # For the tests only: which replica (or replicas, on a retry) answered.
    add_header {header} $upstream_addr always;
    include {site};
}}
"""


class Nginx:
    """nginx serving the committed site in front of ``replicas`` (their ports), on loopback:
    HTTPS on :attr:`https_port`, the plain-HTTP redirect on :attr:`http_port`."""

    def __init__(self, folder: Path, replicas: list[int]) -> None:
        binary = nginx_binary()
        assert binary is not None
        self.binary = binary
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.https_port, self.http_port = free_port(), free_port()
        self.certificate, key = self_signed(folder)
        site = render_site(
            SITE.read_text(encoding="utf-8"),
            replicas=replicas,
            ports={443: self.https_port, 80: self.http_port},
            certificate=self.certificate,
            key=key,
        )
        (folder / "chatmem.conf").write_text(site, encoding="utf-8")
        # Workers run as the user nginx starts as (root's would be "nobody", who cannot read
        # a private temporary folder); for another user nginx ignores the line.
        user = ""
        if os.geteuid() == 0:
            user = f"user {getpass.getuser()} {grp.getgrgid(os.getegid()).gr_name};"
        self.conf = folder / "nginx.conf"
        self.conf.write_text(
            _MAIN.format(
                prefix=folder, user=user, header=UPSTREAM_HEADER, site=folder / "chatmem.conf"
            ),
            encoding="utf-8",
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"

    def tls(self) -> ssl.SSLContext:
        """A client context that trusts this nginx's certificate."""
        return ssl.create_default_context(cafile=str(self.certificate))

    def check(self) -> None:
        """``nginx -t`` on the configuration: it parses, the certificate loads."""
        done = subprocess.run(
            [*self._command(), "-t"], capture_output=True, text=True, check=False, timeout=60
        )
        assert done.returncode == 0, done.stderr

    def _command(self) -> list[str]:
        return [self.binary, "-p", str(self.folder), "-c", str(self.conf), "-e", "stderr"]

    def start(self) -> None:
        """Starts nginx and returns once it proxies ``/healthz`` to a replica."""
        self.check()
        log = (self.folder / "stderr.log").open("wb")
        self.proc = subprocess.Popen(self._command(), stdout=log, stderr=log)
        with httpx.Client(verify=self.tls(), timeout=5) as client:
            wait_ready(
                self.url + "/healthz",
                timeout=START_TIMEOUT,
                process=self.proc,
                client=client,
                why=lambda: f"nginx: {self.errors()}",
            )

    def errors(self) -> str:
        logs = [self.folder / "stderr.log", self.folder / "error.log"]
        return "\n".join(p.read_text(errors="replace")[-4000:] for p in logs if p.exists())

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


def upstream(response: httpx.Response) -> int:
    """The port of the replica that answered ``response`` through nginx (the last one nginx
    tried, when it went on from a refused one)."""
    tried = response.headers[UPSTREAM_HEADER]
    return int(tried.split(",")[-1].strip().rsplit(":", 1)[1])
