"""Initial schema: sweeps, sweep_trials, trials, results, models, datasets.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("file", sa.String(length=300), nullable=True),
        sa.Column("items", sa.Integer(), nullable=True),
        sa.Column("categories", sa.Integer(), nullable=True),
        sa.Column("chat", sa.Boolean(), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "models",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("architecture", sa.String(length=64), nullable=True),
        sa.Column("parameters", sa.BigInteger(), nullable=True),
        sa.Column("vocab_size", sa.Integer(), nullable=True),
        sa.Column("layers", sa.Integer(), nullable=True),
        sa.Column("dtype", sa.String(length=16), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("spec", JSON, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("code_version", sa.String(length=80), nullable=False),
        sa.Column("driver", sa.String(length=200), nullable=True),
        sa.Column("heartbeat_at", sa.Float(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("config", JSON, nullable=False),
        sa.Column("method", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("draft", sa.String(length=200), nullable=False),
        sa.Column("dataset", sa.String(length=64), nullable=False),
        sa.Column("temperature", sa.Float(), nullable=False),
        sa.Column("max_new_tokens", sa.Integer(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker_host", sa.String(length=200), nullable=True),
        sa.Column("gpu_id", sa.String(length=32), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("wall_s", sa.Float(), nullable=True),
        sa.Column("load_s", sa.Float(), nullable=True),
        sa.Column("code_version", sa.String(length=80), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("config_hash"),
    )
    op.create_index("ix_trials_method", "trials", ["method"], unique=False)
    op.create_index("ix_trials_pair", "trials", ["target", "draft"], unique=False)
    op.create_index("ix_trials_status", "trials", ["status"], unique=False)

    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("throughput", sa.Float(), nullable=False),
        sa.Column("acceptance_rate", sa.Float(), nullable=False),
        sa.Column("tokens_per_iteration", sa.Float(), nullable=False),
        sa.Column("mean_accepted_length", sa.Float(), nullable=False),
        sa.Column("mean_tree_size", sa.Float(), nullable=False),
        sa.Column("ttft_s", sa.Float(), nullable=False),
        sa.Column("tpot_s", sa.Float(), nullable=False),
        sa.Column("total_s", sa.Float(), nullable=False),
        sa.Column("prefill_s", sa.Float(), nullable=False),
        sa.Column("draft_s", sa.Float(), nullable=False),
        sa.Column("target_s", sa.Float(), nullable=False),
        sa.Column("verify_s", sa.Float(), nullable=False),
        sa.Column("bookkeeping_s", sa.Float(), nullable=False),
        sa.Column("forward_s", sa.Float(), nullable=False),
        sa.Column("overhead_share", sa.Float(), nullable=False),
        sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("new_tokens", sa.Integer(), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("prompts", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens_mean", sa.Float(), nullable=False),
        sa.Column("per_prompt", JSON, nullable=False),
        sa.Column("per_iteration", JSON, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("config_hash"),
        sa.UniqueConstraint("trial_id"),
    )
    op.create_table(
        "sweep_trials",
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("sweep_id", "trial_id"),
    )
    op.create_index("ix_sweep_trials_trial_id", "sweep_trials", ["trial_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_sweep_trials_trial_id", table_name="sweep_trials")

    op.drop_table("sweep_trials")
    op.drop_table("results")
    op.drop_index("ix_trials_status", table_name="trials")
    op.drop_index("ix_trials_pair", table_name="trials")
    op.drop_index("ix_trials_method", table_name="trials")

    op.drop_table("trials")
    op.drop_table("sweeps")
    op.drop_table("models")
    op.drop_table("datasets")
