"""CHECK constraints on the status columns of trials and sweeps.

The allowed values are written out here, as they were when this revision was made (a
migration is a snapshot: db.models.TrialStatus and SweepStatus may grow later, in a new
revision). Batch mode, so that SQLite, which cannot add a constraint to a table, gets a copy
of the table with the constraint and the rows; db.migrate switches SQLite's foreign keys off
meanwhile, or dropping the old table would cascade to results and sweep_trials.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TRIAL_STATUSES = ("pending", "running", "done", "failed", "cancelled")
SWEEP_STATUSES = ("submitted", "running", "interrupted", "cancelled", "finished")


def _status_in(values: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.create_check_constraint("ck_trials_status", _status_in(TRIAL_STATUSES))
    with op.batch_alter_table("sweeps") as batch:
        batch.create_check_constraint("ck_sweeps_status", _status_in(SWEEP_STATUSES))


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_constraint("ck_sweeps_status", type_="check")
    with op.batch_alter_table("trials") as batch:
        batch.drop_constraint("ck_trials_status", type_="check")
