"""``chatmem keys rotate``: re-encrypt every stored API key under a new key (PROF-3).

Stop the server first (or restart it right after): a running server keeps the old key in
memory and could not read secrets written under the new one.
"""

from __future__ import annotations

import typer

from chatmem.models.rotation import rotate
from chatmem.security.private_dir import make_private_dir
from chatmem.security.secret_box import encode_key, load_key
from chatmem.settings import Settings
from chatmem.store.db import Database


def register(app: typer.Typer) -> None:
    keys_app = typer.Typer(
        help="Manage the key that encrypts stored API keys.", no_args_is_help=True
    )
    app.add_typer(keys_app, name="keys")

    @keys_app.command("rotate")
    def keys_rotate() -> None:
        """Re-encrypt every stored API key and MCP header under a new key."""
        settings = Settings()
        make_private_dir(settings.state_dir)
        old = load_key(settings.state_dir, settings.encryption_key)
        db = Database.from_settings(settings)
        try:
            db.migrate()
            result = rotate(db, old)
        finally:
            db.dispose()
        typer.echo(
            f"Re-encrypted {result.profiles} profile key(s) and {result.mcp_servers} MCP "
            "server header set(s).",
            err=True,
        )
        if old.source == "env":
            typer.echo(
                "The key comes from CHATMEM_ENCRYPTION_KEY: set it to the new value below on "
                "every replica and restart them (the old key no longer decrypts anything):",
                err=True,
            )
            typer.echo(encode_key(result.new_box.key))
        else:
            typer.echo(
                f"The new key is in {old.path}; back it up with the database and restart the server.",
                err=True,
            )
