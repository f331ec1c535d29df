"""``chatmem backup DIR`` and ``chatmem restore DIR`` (:mod:`chatmem.store.backup`)."""

from __future__ import annotations

from pathlib import Path

import typer

from chatmem.settings import Settings
from chatmem.store.backup import backup, restore


def _say(line: str) -> None:
    typer.echo(line, err=True)


def register(app: typer.Typer) -> None:
    @app.command("backup")
    def backup_command(
        folder: Path = typer.Argument(..., help="A new or empty folder for the copy."),
    ) -> None:
        """A consistent copy of the state (database, key file, archives) while the server
        runs.  PostgreSQL: copies the key and archives; dump the database with pg_dump."""
        report = backup(Settings(), folder, say=_say)
        what = "the database, " if report.copied_database else ""
        key = {"file": "the key file, ", "environment": "", "none": ""}[report.key]
        _say(f"Backed up {what}{key}{report.archive_files} archive file(s) into {folder}.")

    @app.command("restore")
    def restore_command(
        folder: Path = typer.Argument(..., help="A folder written by chatmem backup."),
    ) -> None:
        """Puts a backup into an empty state folder (CHATMEM_STATE_DIR).  Start the server
        afterwards: it brings the schema up to date."""
        settings = Settings()
        manifest = restore(settings, folder, say=_say)
        _say(
            f"Restored the backup of {manifest.get('created_at')} (chatmem "
            f"{manifest.get('chatmem')}) into {settings.state_dir}."
        )
