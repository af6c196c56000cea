"""A sweep's tags and note (`orch tag`, `orch note`; shown by `orch ui`), and the library
versions each trial ran with.

`sweeps.tags`: a JSON list of short labels, sorted, no repeats (None or [] for none);
`sweeps.note`: free text (None for none). Both are the lab's annotations, outside the
sweep's spec: they never change which trials a sweep has.
`trials.versions`: {python, torch, transformers, triton, driver} of the worker that ran it
(engine.curves.device_info; "" for a library it lacks); None for trials run before.

Revision ID: 0012
Revises: 0010 (0011 is added in parallel; the lead re-chains the two)
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("tags", JSON, nullable=True))
        batch.add_column(sa.Column("note", sa.Text(), nullable=True))
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("versions", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("versions")
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("note")
        batch.drop_column("tags")
