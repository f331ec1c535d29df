"""``chatmem export`` and ``chatmem import``: export/import (STORE-5) from the command line.

Both open the database named by the settings (migrated first, like the server), act for one
user — ``--user NAME``, else the first administrator (or the only user) — and never need the
server.  ``import`` reads the file as a stream inside one transaction and shows a progress bar
by bytes read when stderr is a terminal; ``export`` writes to a temporary file next to the
target and renames it at the end, so an interrupted export never leaves a half file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from chatmem.bounds import Bounds
from chatmem.errors import InvalidInput, NotFound
from chatmem.formats.reader import FORMAT_NAMES
from chatmem.formats.source import ImportSource
from chatmem.security.private_dir import make_private_dir
from chatmem.settings import Settings
from chatmem.store import accounts
from chatmem.store.accounts import UserRecord
from chatmem.store.archive import Archiver, archive_imported
from chatmem.store.db import Database
from chatmem.store.exchange.exporter import export_conversation_ids, export_stream
from chatmem.store.exchange.importer import import_source
from chatmem.store.exchange.staged import STAGING_PREFIX
from chatmem.store.quotas import Limits
from chatmem.store.sessions import Session


def _database(settings: Settings) -> Database:
    make_private_dir(settings.state_dir)
    db = Database.from_settings(settings)
    db.migrate()
    return db


def resolve_user(session: Session, name: str | None) -> UserRecord:
    """``--user NAME``, else the first administrator, else the only user."""
    if name is not None:
        user = accounts.user_by_name(session, name)
        if user is None:
            raise NotFound(f"user {name!r}")
        return user
    admin = accounts.first_admin(session)
    if admin is not None:
        return admin
    only = accounts.sole_user(session, not_prefixed=STAGING_PREFIX)  # not an import's staging owner
    if only is not None:
        return only
    raise InvalidInput("No administrator to act for: name the user with --user NAME.")


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_command(
        output: Path = typer.Option(..., "-o", "--output", help="File to write ('-' for stdout)."),
        user: str | None = typer.Option(
            None, "--user", help="Whose conversations (default: the admin)."
        ),
        conversation: str | None = typer.Option(
            None, "--conversation", help="Export only this conversation id."
        ),
    ) -> None:
        """Export conversations to one chatmem.export/1 JSON file."""
        settings = Settings()
        db = _database(settings)
        archived = Archiver.from_settings(settings, db).read
        try:
            with db.session() as session:
                owner = resolve_user(session, user)
                ids = export_conversation_ids(session, owner, conversation)
                if str(output) == "-":
                    for chunk in export_stream(session, ids, archived=archived):
                        sys.stdout.buffer.write(chunk)
                    sys.stdout.buffer.flush()
                    return
                temp = output.with_name(f".{output.name}.partial")
                size = 0
                with open(temp, "wb") as out:
                    for chunk in export_stream(session, ids, archived=archived):
                        out.write(chunk)
                        size += len(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temp, output)
        finally:
            db.dispose()
        typer.echo(f"Exported {len(ids)} conversation(s), {size:,} bytes, to {output}.", err=True)

    @app.command("import")
    def import_command(
        file: Path = typer.Argument(
            ...,
            exists=True,
            dir_okay=False,
            readable=True,
            help="chatmem, ChatGPT, Claude or Open WebUI export.",
        ),
        user: str | None = typer.Option(
            None, "--user", help="Import for this user (default: the admin)."
        ),
    ) -> None:
        """Import an export file (all or nothing; already imported conversations are skipped)."""
        settings = Settings()
        db = _database(settings)
        console = Console(stderr=True)
        show = console.is_terminal
        try:
            with db.session() as session:
                owner = resolve_user(session, user)
            # The writer transaction starts with the first insert, after the file was read.
            with open(file, "rb") as raw, db.session(write=True) as session:
                source = ImportSource(raw, file.name, bounds=Bounds.from_settings(settings))
                progress = _progress(console) if show else None
                if progress is not None:
                    with progress:
                        task = progress.add_task(f"Importing {file.name}", total=source.total_bytes)
                        result = import_source(
                            session,
                            owner,
                            source,
                            limits=Limits.from_settings(settings),
                            on_progress=lambda done, _total: progress.update(task, completed=done),
                            on_saving=lambda: progress.update(task, description="Saving"),
                        )
                else:
                    result = import_source(
                        session, owner, source, limits=Limits.from_settings(settings)
                    )
                owner_id = owner.id
            if result.archived_ids:  # committed: archive again what was archived at the source
                archive_imported(
                    Archiver.from_settings(settings, db), owner_id, result.archived_ids
                )
        finally:
            db.dispose()
        line = (
            f"Imported {result.imported} conversation(s) with {result.messages} message(s) "
            f"from a {FORMAT_NAMES.get(result.format, result.format)}"
        )
        if result.skipped:
            line += f"; {result.skipped} already present, skipped"
        if result.skipped_empty:
            line += f"; {result.skipped_empty} without any text, skipped"
        if result.evicted or result.evicted_messages:
            line += (
                f"; the storage quota removed {result.evicted} conversation(s) and "
                f"{result.evicted_messages} message(s)"
            )
        typer.echo(line + ".")
