"""The device a trial ran on, by name, per trial.

`trials.device_name` is what the worker that ran the trial measured on: the CUDA device's name
(e.g. "NVIDIA H100 80GB HBM3") or the CPU model (engine.profile.device_info), beside
`worker_host` and `gpu_id`. The trial's config holds the device kind (cpu, cuda) it was
hashed with; this column tells two GPU kinds apart. None for trials recorded before it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("device_name", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("device_name")
