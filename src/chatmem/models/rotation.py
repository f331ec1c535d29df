"""Key rotation (PROF-3): re-encrypt every stored secret under a new master key.

All rows are re-encrypted in ONE database transaction, so a failure leaves every secret
readable under the old key.  For a key file the order is: write the new key to a temporary
0600 file next to the old one, commit the database transaction, then atomically rename the
temporary file over the key file.  A crash between commit and rename leaves the new key in
``secret.key.next``: stored secrets then report "encrypted under another key", and moving that
file over ``secret.key`` repairs it.  With ``CHATMEM_ENCRYPTION_KEY`` the
new key is returned for the operator to roll out (the command prints instructions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy import select

from chatmem.security.secret_box import (
    SecretBox,
    mcp_server_aad,
    new_key,
    profile_aad,
    write_key_file_atomically,
)
from chatmem.store.db import Database
from chatmem.store.tables.profiles import McpServer, ModelProfile


@dataclass(frozen=True)
class RotationResult:
    new_box: SecretBox
    profiles: int
    mcp_servers: int


def rotate(db: Database, old: SecretBox, new_key_bytes: bytes | None = None) -> RotationResult:
    """Re-encrypt every profile API key and MCP header set; then install the new key file."""
    new = SecretBox(new_key_bytes or new_key(), source=old.source, path=old.path)
    staged = None
    if old.source == "file" and old.path is not None:
        staged = old.path.with_name(old.path.name + ".next")
        write_key_file_atomically(staged, new.key)
    try:
        with db.session() as session:
            profiles = 0
            for row in session.scalars(
                select(ModelProfile).where(ModelProfile.api_key_ciphertext.is_not(None))
            ):
                aad = profile_aad(row.id)
                assert row.api_key_ciphertext is not None
                row.api_key_ciphertext = new.encrypt(old.decrypt(row.api_key_ciphertext, aad), aad)
                profiles += 1
            servers = 0
            for server in session.scalars(
                select(McpServer).where(McpServer.headers_ciphertext.is_not(None))
            ):
                aad = mcp_server_aad(server.id)
                assert server.headers_ciphertext is not None
                server.headers_ciphertext = new.encrypt(
                    old.decrypt(server.headers_ciphertext, aad), aad
                )
                servers += 1
    except BaseException:
        if staged is not None:
            staged.unlink(missing_ok=True)
        raise
    if staged is not None and old.path is not None:
        os.replace(staged, old.path)
    return RotationResult(new, profiles, servers)
