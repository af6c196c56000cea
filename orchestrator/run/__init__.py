"""Running trials: the driver (runner.py) claims a sweep's trials in the store and hands them
to an executor (executors/: local, Ray); a worker runs one trial with run_trial (trial.py).
"""
