"""orchestrator/run/version.py code_version: the commit every trial records, +dirty with uncommitted
code."""


def test_a_database_file_in_the_checkout_does_not_make_the_code_dirty(tmp_path):
    """docs/repro/orch.db is tracked and every trial run into it changes it: the trials must
    still record the clean commit; a changed source file marks it +dirty."""
    import subprocess

    from orchestrator.run.version import git_version

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "orch.db").write_bytes(b"v1")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    assert git_version(tmp_path) == sha
    (tmp_path / "docs" / "orch.db").write_bytes(b"v2")  # a run wrote its results
    assert git_version(tmp_path) == sha
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_version(tmp_path) == sha + "+dirty"
    not_git = tmp_path.parent / "plain"
    not_git.mkdir()
    assert git_version(not_git) is None
