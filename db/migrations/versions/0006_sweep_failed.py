"""A sweep whose trials all failed ends `failed`, not `finished`.

The CHECK constraint on sweeps.status allows the new value (batch mode, as in 0002: SQLite
gets a copy of the table). Sweeps that already ended with every trial failed become failed;
going back, failed sweeps become finished again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BEFORE = ("submitted", "running", "interrupted", "cancelled", "finished")
AFTER = (*BEFORE, "failed")
ALL_FAILED = (
    "status = 'finished' "
    "AND EXISTS (SELECT 1 FROM sweep_trials st WHERE st.sweep_id = sweeps.id) "
    "AND NOT EXISTS (SELECT 1 FROM sweep_trials st JOIN trials t ON t.id = st.trial_id "
    "WHERE st.sweep_id = sweeps.id AND t.status <> 'failed')"
)


def _status_in(values: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def _constraint(values: tuple[str, ...]) -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_constraint("ck_sweeps_status", type_="check")
        batch.create_check_constraint("ck_sweeps_status", _status_in(values))


def upgrade() -> None:
    _constraint(AFTER)
    op.execute(f"UPDATE sweeps SET status = 'failed' WHERE {ALL_FAILED}")


def downgrade() -> None:
    op.execute("UPDATE sweeps SET status = 'finished' WHERE status = 'failed'")
    _constraint(BEFORE)
