"""``chatmem user add`` and ``chatmem token create|list|revoke``: accounts from the command
line.

Each opens the database named by the settings (migrating it first, as the server does), so
they work before the server ever ran.  ``token create`` prints the token alone on stdout — it
is shown once and stored only as a digest — so scripts can capture it; ``token list`` shows a
user's tokens (id, created, last used, label: never the secret) and ``token revoke`` deletes one.
"""

from __future__ import annotations

import sys

import typer

from chatmem.errors import InvalidInput
from chatmem.security.private_dir import make_private_dir
from chatmem.settings import Settings
from chatmem.store import accounts
from chatmem.store.db import Database
from chatmem.store.types import iso


def _database() -> Database:
    settings = Settings()
    make_private_dir(settings.state_dir)
    db = Database.from_settings(settings)
    db.migrate()
    return db


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise InvalidInput("The password must not be empty.")
    return password


def register(app: typer.Typer) -> None:
    user_app = typer.Typer(help="Manage user accounts.", no_args_is_help=True)
    token_app = typer.Typer(help="Manage API tokens.", no_args_is_help=True)
    app.add_typer(user_app, name="user")
    app.add_typer(token_app, name="token")

    @user_app.command("add")
    def user_add(
        name: str = typer.Argument(..., help="The new user's name."),
        admin: bool = typer.Option(False, "--admin", help="Make the user an administrator."),
        password_stdin: bool = typer.Option(
            False, "--password-stdin", help="Read the password from the first line of stdin."
        ),
    ) -> None:
        """Create a user (the password is prompted for, or read from stdin)."""
        password_hash = accounts.new_password_hash(_read_password(password_stdin))
        db = _database()
        try:
            with db.session(write=True) as session:
                accounts.create_user(session, name, password_hash=password_hash, is_admin=admin)
        finally:
            db.dispose()
        typer.echo(f"Created {'administrator' if admin else 'user'} {name}.", err=True)

    @token_app.command("create")
    def token_create(name: str = typer.Argument(..., help="The user the token acts as.")) -> None:
        """Print a new API token for a user on stdout (shown once)."""
        db = _database()
        try:
            with db.session(write=True) as session:
                user = accounts.require_user(session, name)
                token = accounts.create_api_token(session, user, label="cli")
        finally:
            db.dispose()
        typer.echo(token)

    @token_app.command("list")
    def token_list(name: str = typer.Argument(..., help="Whose tokens.")) -> None:
        """List a user's API tokens: id, created, last used, label (the secrets are not kept)."""
        db = _database()
        try:
            with db.session() as session:
                user = accounts.require_user(session, name)
                records = accounts.api_tokens(session, user.id)
        finally:
            db.dispose()
        for record in records:
            used = iso(record.last_used_at) if record.last_used_at else "never"
            typer.echo(f"{record.id}\t{iso(record.created_at)}\t{used}\t{record.label}")
        if not records:
            typer.echo(f"{name} has no API tokens.", err=True)

    @token_app.command("revoke")
    def token_revoke(
        name: str = typer.Argument(..., help="Whose token."),
        token_id: str = typer.Argument(..., help="The token's id (chatmem token list)."),
    ) -> None:
        """Revoke one of a user's API tokens (running servers stop taking it within seconds)."""
        db = _database()
        try:
            with db.session(write=True) as session:
                user = accounts.require_user(session, name)
                accounts.revoke_api_token(session, user.id, token_id)
        finally:
            db.dispose()
        typer.echo(f"Revoked token {token_id} of {name}.", err=True)
