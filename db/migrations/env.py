"""Alembic environment. db.migrate hands in a connection inside an open transaction; the
`alembic` command line (db/alembic.ini) builds one from sqlalchemy.url or ORCH_DB_URL."""

from alembic import context
from sqlalchemy import text

from db.models import Base

ADVISORY_LOCK_KEY = 7152024  # serialises concurrent first-time upgrades on Postgres


def run(connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text(f"SELECT pg_advisory_xact_lock({ADVISORY_LOCK_KEY})"))
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


given = context.config.attributes.get("connection")
if given is not None:
    run(given)
else:
    from db.migrate import migration_transaction
    from db.session import create_db_engine

    engine = create_db_engine(context.config.get_main_option("sqlalchemy.url") or None)
    with migration_transaction(engine) as c:
        run(c)
