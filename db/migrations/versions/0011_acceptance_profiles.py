"""Sequoia's measured acceptance profiles: one row per pair, dtypes, dataset and sampling.

`acceptance_profiles` holds one row per (target, draft, dtype, draft_dtype, dataset,
temperature, top_p, draft_temperature, draft_top_p, width): the per-rank acceptance vector
p_1..p_width that an acceptance trial measured (engine/drafters/sequoia/profile.py), the
protocol it used, the trial's config hash, where and when it ran. The draft's dtype and
sampling are stored resolved, so the key has no NULLs. The first measurement of a key stands:
every Sequoia trial with `profile: measured` of that key built its tree from it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
KEY = (
    "target",
    "draft",
    "dtype",
    "draft_dtype",
    "dataset",
    "temperature",
    "top_p",
    "draft_temperature",
    "draft_top_p",
    "width",
)


def upgrade() -> None:
    op.create_table(
        "acceptance_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("draft", sa.String(length=200), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("draft_dtype", sa.String(length=16), nullable=False),
        sa.Column("dataset", sa.String(length=200), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("top_p", sa.Float(), nullable=False),
        sa.Column("draft_temperature", sa.Float(), nullable=False),
        sa.Column("draft_top_p", sa.Float(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("profile", JSON, nullable=False),
        sa.Column("positions", sa.Integer(), nullable=False),
        sa.Column("protocol", JSON, nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("device_name", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("code_version", sa.String(length=80), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(*KEY, name="uq_acceptance_profiles_key"),
    )


def downgrade() -> None:
    op.drop_table("acceptance_profiles")
