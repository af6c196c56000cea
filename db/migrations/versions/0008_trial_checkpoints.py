"""The learned components a trial used, per trial.

`trials.checkpoints` lists, for each checkpoint the trial's method parameters name (a
`checkpoint` or `*_checkpoint` parameter: DDTree's block drafter, the NDE selector, a TALF
draft), what engine.train.checkpoint.describe returns: name, kind, sha256 of the weights and
the training configuration, so a result says exactly which weights made it. None for trials
that used none, and for trials recorded before it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("checkpoints", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("checkpoints")
