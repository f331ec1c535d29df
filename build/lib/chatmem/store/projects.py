"""Project repository (PROJ-1): projects, their files, and each conversation's own pin or
exclusion of a project file.

Ownership goes through the project's user: :func:`owned_project` answers a foreign id like a
missing one (STORE-1), and a conversation can only be put into one of its owner's projects.
A project file's state is per conversation (``project_file_states``; no row: ``auto``, sent
with every request but in ``off``), as a conversation file's state is per file.  Every change
to a project bumps its ``updated_at`` and every state change its conversation's, so cached
plans see it (``store.engine.plan_version``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, bindparam, delete, func, select, update
from sqlalchemy.orm import Session

from chatmem.errors import InvalidInput, NotFound, QuotaExceeded
from chatmem.store.accounts import Account
from chatmem.store.files import MAX_NAME, check_state
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.projects import Project, ProjectFile, ProjectFileState
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import iso, utcnow

if TYPE_CHECKING:  # conversations imports this module
    from chatmem.store.conversations import ConversationRecord

MAX_PROJECT_NAME = 200


def _name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_PROJECT_NAME:
        raise InvalidInput(f"A project name is 1 to {MAX_PROJECT_NAME} characters.")
    return name


@dataclass(frozen=True, slots=True)
class ProjectRecord:
    """One project as read (the columns of ``projects``)."""

    id: str
    user_id: str
    name: str
    instructions: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ProjectFileRecord:
    """One project file as read (the columns of ``project_files``)."""

    id: str
    project_id: str
    name: str
    content: str
    size: int
    tokens_estimate: int
    tokens_o200k: int
    tokens_cl100k: int
    created_at: datetime


# The records' columns, read as they are (no ORM object is built).
_PROJECTS = select(*(getattr(Project, f.name) for f in dataclass_fields(ProjectRecord)))
_FILES_OF = select(*(getattr(ProjectFile, f.name) for f in dataclass_fields(ProjectFileRecord)))


def _project_record(row: Project) -> ProjectRecord:
    """The record of an ORM row (after a write)."""
    return ProjectRecord(*(getattr(row, f.name) for f in dataclass_fields(ProjectRecord)))


def _file_record(row: ProjectFile) -> ProjectFileRecord:
    """The record of an ORM row (after a write)."""
    return ProjectFileRecord(*(getattr(row, f.name) for f in dataclass_fields(ProjectFileRecord)))


def owned_project(session: Session, user_id: str, project_id: str) -> ProjectRecord:
    row = session.execute(
        _PROJECTS.where(Project.id == project_id, Project.user_id == user_id)
    ).first()
    if row is None:
        raise NotFound("project")
    return ProjectRecord(*row)


def list_projects(session: Session, user: Account) -> list[ProjectRecord]:
    rows = session.execute(
        _PROJECTS.where(Project.user_id == user.id).order_by(Project.name, Project.id)
    )
    return [ProjectRecord(*row) for row in rows]


def create_project(
    session: Session,
    user: Account,
    *,
    name: str,
    instructions: str = "",
    limit: int | None = None,
    project_id: str | None = None,
) -> ProjectRecord:
    """``limit``: the most projects a user may keep (STORE-4's quotas; None: no limit)."""
    if limit is not None:
        count = session.scalar(select(func.count(Project.id)).where(Project.user_id == user.id))
        if (count or 0) >= limit:
            raise QuotaExceeded("projects", limit)
    now = utcnow()
    project = Project(
        **({"id": project_id} if project_id else {}),
        user_id=user.id,
        name=_name(name),
        instructions=instructions,
        created_at=now,
        updated_at=now,
    )
    session.add(project)
    session.flush()
    return _project_record(project)


def _touch_project(session: Session, project_id: str) -> None:
    """The project changed (its ``updated_at`` is now): what keys its conversations'
    cached plans."""
    session.execute(update(Project).where(Project.id == project_id).values(updated_at=utcnow()))


def update_project(
    session: Session, project: ProjectRecord, changes: dict[str, Any]
) -> ProjectRecord:
    """Applies a PATCH (only keys present in ``changes`` change); returns the project as it
    now is."""
    values: dict[str, Any] = {}
    if "name" in changes:
        if changes["name"] is None:
            raise InvalidInput("name: must be a string")
        values["name"] = _name(changes["name"])
    if "instructions" in changes:
        values["instructions"] = changes["instructions"] or ""
    values["updated_at"] = utcnow()
    session.execute(update(Project).where(Project.id == project.id).values(**values))
    return replace(project, **values)


def delete_project(session: Session, project: ProjectRecord) -> None:
    """Deletes the project and its files; its conversations stay, outside any project."""
    session.execute(
        update(Conversation)
        .where(Conversation.project_id == project.id)
        .values(project_id=None, updated_at=utcnow())
    )
    session.execute(delete(Project).where(Project.id == project.id))


def check_project(session: Session, user_id: str, project_id: str | None) -> None:
    """A conversation may only go into one of its owner's projects (404 otherwise)."""
    if project_id is not None:
        owned_project(session, user_id, project_id)


def project_conversations(session: Session, project_id: str) -> list[ConversationRecord]:
    from chatmem.store.conversations import ConversationRecord  # see TYPE_CHECKING above

    statement = (
        select(*(getattr(Conversation, f.name) for f in dataclass_fields(ConversationRecord)))
        .where(Conversation.project_id == project_id, Conversation.archived_at.is_(None))
        .order_by(Conversation.last_active_at.desc(), Conversation.id)
    )
    return [ConversationRecord(*row) for row in session.execute(statement)]


def conversation_count(session: Session, project_id: str) -> int:
    return int(
        session.scalar(
            select(func.count(Conversation.id)).where(
                Conversation.project_id == project_id, Conversation.archived_at.is_(None)
            )
        )
        or 0
    )


# --- files ------------------------------------------------------------------------------


def add_project_file(
    session: Session, project_id: str, name: str, content: str, *, file_id: str | None = None
) -> ProjectFileRecord:
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise InvalidInput(f"A file name is 1 to {MAX_NAME} characters.")
    if "\x00" in content:
        raise InvalidInput("Only text files can be attached.")
    row = ProjectFile(
        **({"id": file_id} if file_id else {}),
        project_id=project_id,
        name=name,
        content=content,
        size=len(content.encode("utf-8")),
        created_at=utcnow(),
        **counts_for_text(content),
    )
    session.add(row)
    session.flush()
    _touch_project(session, project_id)
    return _file_record(row)


def project_files(session: Session, project_id: str) -> list[ProjectFileRecord]:
    rows = session.execute(
        _FILES_OF.where(ProjectFile.project_id == project_id).order_by(
            ProjectFile.created_at, ProjectFile.id
        )
    )
    return [ProjectFileRecord(*row) for row in rows]


def owned_project_file(session: Session, user_id: str, file_id: str) -> ProjectFileRecord:
    row = session.execute(
        _FILES_OF.join(Project, Project.id == ProjectFile.project_id).where(
            ProjectFile.id == file_id, Project.user_id == user_id
        )
    ).first()
    if row is None:
        raise NotFound("file")
    return ProjectFileRecord(*row)


def delete_project_file(session: Session, project: ProjectRecord, row: ProjectFileRecord) -> None:
    session.execute(delete(ProjectFile).where(ProjectFile.id == row.id))
    _touch_project(session, project.id)


def set_file_state(
    session: Session,
    conversation: Conversation | ConversationRecord,
    row: ProjectFileRecord,
    state: str,
) -> None:
    """The conversation's own state for a file of its project (``auto`` clears it)."""
    if conversation.project_id != row.project_id:
        raise NotFound("file")
    check_state(state)
    session.execute(
        delete(ProjectFileState).where(
            ProjectFileState.conversation_id == conversation.id,
            ProjectFileState.file_id == row.id,
        )
    )
    if state != "auto":
        session.add(ProjectFileState(conversation_id=conversation.id, file_id=row.id, state=state))
    session.execute(
        update(Conversation).where(Conversation.id == conversation.id).values(updated_at=utcnow())
    )
    session.flush()


def file_states(session: Session, conversation_id: str) -> dict[str, str]:
    """The conversation's own states of project files (file id -> pinned/excluded)."""
    rows = session.execute(
        select(ProjectFileState.file_id, ProjectFileState.state).where(
            ProjectFileState.conversation_id == conversation_id
        )
    )
    return {file_id: state for file_id, state in rows}


# --- what a plan reads ------------------------------------------------------------------

_PROJECT = select(Project.instructions).where(Project.id == bindparam("pid"))
_FILES = (
    select(
        ProjectFile.id,
        ProjectFile.name,
        ProjectFile.content,
        ProjectFile.tokens_estimate,
        ProjectFile.tokens_o200k,
        ProjectFile.tokens_cl100k,
        ProjectFileState.state,
    )
    .outerjoin(
        ProjectFileState,
        and_(
            ProjectFileState.file_id == ProjectFile.id,
            ProjectFileState.conversation_id == bindparam("cid"),
        ),
    )
    .where(ProjectFile.project_id == bindparam("pid"))
    .order_by(ProjectFile.created_at, ProjectFile.id)
)


def plan_inputs(
    connection: Connection, project_id: str, conversation_id: str
) -> tuple[str, Sequence[Any]]:
    """The project's instructions and its files (rows with the conversation's ``state``,
    NULL for ``auto``), as a plan of the conversation needs them."""
    instructions = connection.execute(_PROJECT, {"pid": project_id}).scalar()
    if instructions is None:  # deleted meanwhile
        return "", ()
    rows = connection.execute(_FILES, {"pid": project_id, "cid": conversation_id}).all()
    return instructions, rows


# --- export and import (STORE-5) ------------------------------------------------------------


def exported_project(
    session: Session, project_id: str, conversation_id: str
) -> dict[str, Any] | None:
    """A conversation's project as its export carries it: name, instructions, and the files
    with this conversation's state of each (``chatmem.export/1``'s ``project``)."""
    project = session.get(Project, project_id)
    if project is None:
        return None
    states = file_states(session, conversation_id)
    return {
        "id": project.id,
        "name": project.name,
        "instructions": project.instructions,
        "files": [
            {
                "id": f.id,
                "name": f.name,
                "content": f.content,
                "state": states.get(f.id, "auto"),
                "created_at": iso(f.created_at),
            }
            for f in project_files(session, project.id)
        ],
    }


def imported_project(
    session: Session,
    user: Account,
    item: Any,
    conversation_id: str,
    *,
    limit: int | None = None,
    cache: dict[str, str] | None = None,
) -> str | None:
    """The project an imported conversation belongs in (PROJ-1): the user's project of that
    name, else a new one with the exported instructions; files it lacks (by name) are added,
    and the conversation's own file states are set.  Returns the project id (None: no
    project).  The conversation row must be written first."""
    if not isinstance(item, dict) or not str(item.get("name") or "").strip():
        return None
    name = _name(str(item["name"]))
    cache = cache if cache is not None else {}
    project_id = cache.get(name) or session.scalar(
        select(Project.id).where(Project.user_id == user.id, Project.name == name).limit(1)
    )
    if project_id is None or session.get(Project, project_id) is None:
        instructions = str(item.get("instructions") or "")
        project_id = create_project(
            session, user, name=name, instructions=instructions, limit=limit
        ).id
    cache[name] = project_id
    by_name = {f.name: f.id for f in project_files(session, project_id)}
    for raw in item.get("files") or []:
        file_id = by_name.get(str(raw.get("name") or "").strip())
        if file_id is None:
            row = add_project_file(
                session, project_id, str(raw["name"]), str(raw.get("content") or "")
            )
            by_name[row.name] = file_id = row.id
        state = raw.get("state") or "auto"
        if state != "auto":
            session.add(
                ProjectFileState(conversation_id=conversation_id, file_id=file_id, state=state)
            )
    session.execute(
        update(Conversation).where(Conversation.id == conversation_id).values(project_id=project_id)
    )
    session.flush()
    return project_id
