"""Certificates of sampled trials: a sampling verifier's distribution check per setting.

`verifier_checks` holds one row per (verifier, tree_sampling, temperature, top_p,
draft_temperature, draft_top_p): the result of engine/distribution_check.py at that setting
(p-value, its power against a verifier emitting the draft's law, level, support, passed),
which code ran it, where and when. The draft's sampling is stored resolved, so the key has no
NULLs. `orch certify` fills it; a rerun replaces a key's row.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "verifier_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("verifier", sa.String(length=64), nullable=False),
        sa.Column("tree_sampling", sa.String(length=32), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("top_p", sa.Float(), nullable=False),
        sa.Column("draft_temperature", sa.Float(), nullable=False),
        sa.Column("draft_top_p", sa.Float(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("p_value", sa.Float(), nullable=False),
        sa.Column("power", sa.Float(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("support_ok", sa.Boolean(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("code_version", sa.String(length=80), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "verifier",
            "tree_sampling",
            "temperature",
            "top_p",
            "draft_temperature",
            "draft_top_p",
            name="uq_verifier_checks_key",
        ),
    )


def downgrade() -> None:
    op.drop_table("verifier_checks")
