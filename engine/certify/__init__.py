"""Losslessness, checked: what the engine can show about a trial's output law.

    teacher_forced.py   per trial: at temperature 0 one teacher-forced target forward re-checks
                        the output against the target's greedy decoding; above it the
                        verifier's claim for its tree sampling
    distribution.py     per verifier and sampling setting: a chi-square test of the output law
                        through generate() on a toy pair (`orch certify` stores it)

The orchestrator turns both into the `lossless` and `ar_equal` result columns.
"""
