"""Hardware profiles: a device's forward-cost curve per model, dtype and engine path.

`profiles` holds one row per (device_name, model, dtype, engine): the curve points as JSON
([[context, n, seconds], ...], engine/profile.py ForwardCurve), who measured (driver, library
versions, cores, host) and when. Re-profiling the same key replaces the row (orch profile,
a sweep's profile trial): a key has one current curve, the latest measured.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_name", sa.String(length=200), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("engine", sa.String(length=16), nullable=False),
        sa.Column("points", JSON, nullable=False),
        sa.Column("driver", sa.String(length=200), nullable=False),
        sa.Column("versions", JSON, nullable=False),
        sa.Column("cores", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("device_name", "model", "dtype", "engine", name="uq_profiles_key"),
    )


def downgrade() -> None:
    op.drop_table("profiles")
