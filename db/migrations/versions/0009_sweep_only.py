"""The cut of a sweep's latest run.

`sweeps.only` holds the `--only` filters of the latest `orch submit | resume` of the sweep
([[KEY, [V1, ...]], ...]; orchestrator/only.py), so that `orch status` counts the trials that
run will still take (its ETA) rather than every pending trial of the grid. None: the latest
run took the whole grid, and for sweeps run before this migration.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("only", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("only")
