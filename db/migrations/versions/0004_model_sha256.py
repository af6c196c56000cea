"""The checked sha256 of a fetched model's GGUF, per model.

`models.gguf_sha256` is what the worker that loaded the model read from its fetch manifest
(engine.fetch checks it against the registry when it reassembles the GGUF); None for built-in
and folder models.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("gguf_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("gguf_sha256")
