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
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, bindparam, delete, func, select, update
from sqlalchemy.orm import Session

from chatmem.errors import InvalidInput, NotFound, QuotaExceeded
from chatmem.store.files import MAX_NAME, check_state
from chatmem.store.tables.accounts import User
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


def owned_project(session: Session, user_id: str, project_id: str) -> Project:
    project = session.get(Project, project_id)
    if project is None or project.user_id != user_id:
        raise NotFound("project")
    return project


def list_projects(session: Session, user: User) -> list[Project]:
    return list(
        session.scalars(
            select(Project).where(Project.user_id == user.id).order_by(Project.name, Project.id)
        )
    )


def create_project(
    session: Session,
    user: User,
    *,
    name: str,
    instructions: str = "",
    limit: int | None = None,
    project_id: str | None = None,
) -> Project:
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
    return project


def update_project(session: Session, project: Project, changes: dict[str, Any]) -> None:
    if "name" in changes:
        if changes["name"] is None:
            raise InvalidInput("name: must be a string")
        project.name = _name(changes["name"])
    if "instructions" in changes:
        project.instructions = changes["instructions"] or ""
    project.updated_at = utcnow()
    session.flush()


def delete_project(session: Session, project: Project) -> None:
    """Deletes the project and its files; its conversations stay, outside any project."""
    session.execute(
        update(Conversation)
        .where(Conversation.project_id == project.id)
        .values(project_id=None, updated_at=utcnow())
    )
    session.delete(project)
    session.flush()


def check_project(session: Session, user_id: str, project_id: str | None) -> None:
    """A conversation may only go into one of its owner's projects (404 otherwise)."""
    if project_id is not None:
        owned_project(session, user_id, project_id)


def project_conversations(session: Session, project_id: str) -> list[Conversation]:
    return list(
        session.scalars(
            select(Conversation)
            .where(Conversation.project_id == project_id, Conversation.archived_at.is_(None))
            .order_by(Conversation.last_active_at.desc(), Conversation.id)
        )
    )


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
    session: Session, project: Project, name: str, content: str, *, file_id: str | None = None
) -> ProjectFile:
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise InvalidInput(f"A file name is 1 to {MAX_NAME} characters.")
    if "\x00" in content:
        raise InvalidInput("Only text files can be attached.")
    row = ProjectFile(
        **({"id": file_id} if file_id else {}),
        project_id=project.id,
        name=name,
        content=content,
        size=len(content.encode("utf-8")),
        created_at=utcnow(),
        **counts_for_text(content),
    )
    session.add(row)
    project.updated_at = utcnow()
    session.flush()
    return row


def project_files(session: Session, project_id: str) -> list[ProjectFile]:
    return list(
        session.scalars(
            select(ProjectFile)
            .where(ProjectFile.project_id == project_id)
            .order_by(ProjectFile.created_at, ProjectFile.id)
        )
    )


def owned_project_file(session: Session, user_id: str, file_id: str) -> ProjectFile:
    row = session.execute(
        select(ProjectFile)
        .join(Project, Project.id == ProjectFile.project_id)
        .where(ProjectFile.id == file_id, Project.user_id == user_id)
    ).first()
    if row is None:
        raise NotFound("file")
    return row[0]


def delete_project_file(session: Session, project: Project, row: ProjectFile) -> None:
    session.delete(row)
    project.updated_at = utcnow()
    session.flush()


def set_file_state(
    session: Session, conversation: ConversationRecord, row: ProjectFile, state: str
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


# --- JSON shapes --------------------------------------------------------------------------


def file_public(row: ProjectFile, *, content: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "project_id": row.project_id,
        "name": row.name,
        "size": row.size,
        "tokens": row.tokens_estimate,
        "created_at": iso(row.created_at),
    }
    if content:
        body["content"] = row.content
    return body


def project_public(session: Session, project: Project, *, files: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": project.id,
        "name": project.name,
        "instructions": project.instructions,
        "created_at": iso(project.created_at),
        "updated_at": iso(project.updated_at),
        "conversation_count": conversation_count(session, project.id),
    }
    if files:
        body["files"] = [file_public(f) for f in project_files(session, project.id)]
    return body


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
    user: User,
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
    found = session.get(Project, project_id) if project_id is not None else None
    project = found or create_project(
        session, user, name=name, instructions=str(item.get("instructions") or ""), limit=limit
    )
    cache[name] = project.id
    by_name = {f.name: f for f in project_files(session, project.id)}
    for raw in item.get("files") or []:
        row = by_name.get(str(raw.get("name") or "").strip())
        if row is None:
            row = add_project_file(
                session, project, str(raw["name"]), str(raw.get("content") or "")
            )
            by_name[row.name] = row
        state = raw.get("state") or "auto"
        if state != "auto":
            session.add(
                ProjectFileState(conversation_id=conversation_id, file_id=row.id, state=state)
            )
    session.execute(
        update(Conversation).where(Conversation.id == conversation_id).values(project_id=project.id)
    )
    session.flush()
    return project.id


def conversation_files_public(
    session: Session,
    conversation: ConversationRecord,
    tokens_column: str = "tokens_estimate",
    statuses: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The conversation's project files as its file list shows them: with this
    conversation's ``state`` and (given the plan's) ``status`` of each."""
    if conversation.project_id is None:
        return []
    states = file_states(session, conversation.id)
    out = []
    for row in project_files(session, conversation.project_id):
        body = {
            **file_public(row),
            "conversation_id": conversation.id,
            "message_id": None,
            "state": states.get(row.id, "auto"),
            "tokens": getattr(row, tokens_column),
            "mime": None,
        }
        if statuses is not None and row.id in statuses:
            body["status"] = statuses[row.id]
        out.append(body)
    return out
