"""Per-trial leases and the Ray node a trial ran on.

`trials.owner` is the id of the driver running the trial (host:pid:start:nonce) and
`trials.lease_until` when its claim runs out (unix seconds, database clock); the driver renews
the lease by heartbeat, and any driver may take over a running trial whose lease has run out.
`trials.worker_node` is the Ray node id of the worker that ran it. All nullable: trials left
running by a driver of an older schema have no lease, so they count as expired.

Batch mode like 0002: SQLite adds the columns in place and copies the table to drop them (the
copy keeps the CHECK constraint and indexes; db.migrate turns foreign keys off meanwhile).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.Float(), nullable=True))
        batch.add_column(sa.Column("worker_node", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("worker_node")
        batch.drop_column("lease_until")
        batch.drop_column("owner")
