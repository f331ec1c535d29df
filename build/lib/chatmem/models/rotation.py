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

from chatmem.security.secret_box import SecretBox, new_key, write_key_file_atomically
from chatmem.store.db import Database
from chatmem.store.mcp_servers import reencrypt_headers
from chatmem.store.profiles import reencrypt_api_keys


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
            profiles = reencrypt_api_keys(session, old, new)
            servers = reencrypt_headers(session, old, new)
    except BaseException:
        if staged is not None:
            staged.unlink(missing_ok=True)
        raise
    if staged is not None and old.path is not None:
        os.replace(staged, old.path)
    return RotationResult(new, profiles, servers)
