"""Secrets at rest: AES-GCM with a versioned, row-bound ciphertext (PROF-2, PROF-3).

Design
------
One 32-byte master key encrypts every stored secret (profile API keys, MCP server headers).
Each ciphertext is self-describing::

    version (1 byte) | key id (8 bytes) | nonce (12 bytes) | AES-GCM ciphertext + tag

* ``version`` lets the format change later without guessing.
* ``key id`` is the first 8 bytes of SHA-256 over the key: decryption under the wrong key
  says so plainly ("encrypted under another key") instead of a bare authentication failure,
  which is what an operator who lost or swapped the key file needs to hear.
* The **associated data** is the owning row's identity (e.g. ``profile:<id>``), so a
  ciphertext copied onto another row fails to authenticate (PROF-2).

Where the key comes from (:func:`load_key`): ``CHATMEM_ENCRYPTION_KEY`` (URL-safe base64 of
32 bytes; the form for several replicas) wins; otherwise ``<state_dir>/secret.key`` holds 32
raw bytes and is created on first start with ``os.open(..., 0o600)`` and ``O_EXCL`` — the mode
is set at creation, never by a later chmod, so there is no window in which the file is
readable by others.  A malformed key raises :class:`~chatmem.errors.ConfigurationError` and the
app refuses to start.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets as _random
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from chatmem.errors import ConfigurationError, SecretUnreadable
from chatmem.security.private_dir import make_private_dir

FORMAT_VERSION = 1
KEY_BYTES = 32
KEY_ID_BYTES = 8
NONCE_BYTES = 12
KEY_FILE_NAME = "secret.key"
_HEADER = 1 + KEY_ID_BYTES + NONCE_BYTES


SecretDecryptError = SecretUnreadable  # the name used in this module


def key_id(key: bytes) -> bytes:
    """The 8-byte identifier stored in every ciphertext made with ``key``."""
    return hashlib.sha256(b"chatmem-key-id\x00" + key).digest()[:KEY_ID_BYTES]


def profile_aad(profile_id: str) -> str:
    """Associated data binding an API key ciphertext to its profile row."""
    return f"profile:{profile_id}"


def mcp_server_aad(server_id: str) -> str:
    """Associated data binding MCP server headers to their row."""
    return f"mcp_server:{server_id}"


@dataclass(frozen=True)
class SecretBox:
    """Encrypts and decrypts secrets under one master key.  Immutable; safe to share."""

    key: bytes = field(repr=False)
    source: str = "file"  # "file" or "env": where the key came from (rotation needs to know)
    path: Path | None = None  # the key file, when source == "file"

    def __post_init__(self) -> None:
        if len(self.key) != KEY_BYTES:
            raise ConfigurationError(f"the encryption key must be {KEY_BYTES} bytes")

    @property
    def key_id(self) -> bytes:
        return key_id(self.key)

    def encrypt(self, plaintext: str, aad: str) -> bytes:
        nonce = _random.token_bytes(NONCE_BYTES)
        body = AESGCM(self.key).encrypt(nonce, plaintext.encode("utf-8"), aad.encode("utf-8"))
        return bytes([FORMAT_VERSION]) + self.key_id + nonce + body

    def decrypt(self, blob: bytes, aad: str) -> str:
        if len(blob) < _HEADER + 16 or blob[0] != FORMAT_VERSION:
            raise SecretDecryptError("stored secret has an unknown format")
        if blob[1 : 1 + KEY_ID_BYTES] != self.key_id:
            raise SecretDecryptError(
                "stored secret was encrypted under another key (is the key file or "
                "CHATMEM_ENCRYPTION_KEY the one this database was written with?)"
            )
        nonce = blob[1 + KEY_ID_BYTES : _HEADER]
        try:
            plain = AESGCM(self.key).decrypt(nonce, blob[_HEADER:], aad.encode("utf-8"))
        except InvalidTag:
            raise SecretDecryptError(
                "stored secret does not belong to this record or is damaged"
            ) from None
        return plain.decode("utf-8")

    def decrypt_optional(self, blob: bytes | None, aad: str) -> str | None:
        return None if blob is None else self.decrypt(blob, aad)


def new_key() -> bytes:
    return _random.token_bytes(KEY_BYTES)


def encode_key(key: bytes) -> str:
    """The ``CHATMEM_ENCRYPTION_KEY`` form of a key."""
    return base64.urlsafe_b64encode(key).decode("ascii")


def decode_env_key(value: str) -> bytes:
    """Parse ``CHATMEM_ENCRYPTION_KEY``; a malformed value is a configuration error."""
    text = value.strip()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        if base64.urlsafe_b64encode(raw).rstrip(b"=") != text.encode("ascii").rstrip(b"="):
            raise ValueError("not canonical URL-safe base64")
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ConfigurationError(
            "CHATMEM_ENCRYPTION_KEY is not valid URL-safe base64; generate one with: "
            'python -c "import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())"'
        ) from None
    if len(raw) != KEY_BYTES:
        raise ConfigurationError(
            f"CHATMEM_ENCRYPTION_KEY must decode to exactly {KEY_BYTES} bytes, got {len(raw)}"
        )
    return raw


def check_env_key(env_key: str | None) -> None:
    """Validate ``CHATMEM_ENCRYPTION_KEY`` without touching the disk (app start-up)."""
    if env_key is not None:
        if env_key.strip() == "":
            raise ConfigurationError("CHATMEM_ENCRYPTION_KEY is set but empty")
        decode_env_key(env_key)


def key_file_path(state_dir: Path) -> Path:
    return Path(state_dir) / KEY_FILE_NAME


def _read_key_file(path: Path) -> bytes:
    data = path.read_bytes()
    if len(data) != KEY_BYTES:
        raise ConfigurationError(
            f"the key file {path} must hold exactly {KEY_BYTES} bytes (it holds {len(data)}); "
            "restore it from your backup"
        )
    return data


def _create_key_file(path: Path) -> bytes:
    """Create the key file with mode 0600 atomically (O_EXCL: never overwrite a key)."""
    make_private_dir(path.parent)  # SEC-3
    key = new_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def load_key(state_dir: Path, env_key: str | None) -> SecretBox:
    """The master key for this deployment (PROF-3): the env key if set, else the key file.

    The key file is created on first start.  Raises ``ConfigurationError`` when the env key is
    malformed or the key file is damaged.
    """
    if env_key is not None and env_key.strip() != "":
        return SecretBox(decode_env_key(env_key), source="env")
    if env_key is not None:
        raise ConfigurationError("CHATMEM_ENCRYPTION_KEY is set but empty")
    path = key_file_path(state_dir)
    try:
        return SecretBox(_read_key_file(path), source="file", path=path)
    except FileNotFoundError:
        pass
    try:
        return SecretBox(_create_key_file(path), source="file", path=path)
    except FileExistsError:  # another process created it in the meantime: use theirs
        return SecretBox(_read_key_file(path), source="file", path=path)


def write_key_file_atomically(path: Path, key: bytes) -> None:
    """Replace the key file: write a 0600 temp file next to it, fsync, rename over."""
    tmp = path.with_name(f".{path.name}.{_random.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
