"""The lab database: SQLAlchemy 2.0 models (db.models), engines and sessions (db.session),
Alembic migrations (db.migrate, db/migrations). Imports nothing else of the project."""

from db.migrate import current_revision, ensure_schema, head_revision, upgrade
from db.session import (
    DEFAULT_URL,
    ENV_URL,
    DatabaseError,
    create_db_engine,
    redact,
    resolve_url,
    scrub,
    session_factory,
)

__all__ = [
    "DEFAULT_URL",
    "ENV_URL",
    "DatabaseError",
    "create_db_engine",
    "current_revision",
    "ensure_schema",
    "head_revision",
    "redact",
    "resolve_url",
    "scrub",
    "session_factory",
    "upgrade",
]
