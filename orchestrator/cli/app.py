"""The `orch` command line: the Click group `main` with every command registered on it. Thin
Click commands over library functions (DESIGN.md), one module per family of commands.

User errors (engine.config.ConfigError and subclasses, Click usage errors) print one line
`error: ...` on stderr and exit with code 2, without a traceback.
"""

from __future__ import annotations

import sys

import click

from engine.config import ConfigError
from orchestrator.cli.certify import certify
from orchestrator.cli.data import datasets, models
from orchestrator.cli.delete import delete
from orchestrator.cli.generate import generate
from orchestrator.cli.labels import note, tag
from orchestrator.cli.profile import profile, profile_import
from orchestrator.cli.results import compare, export, plot, query, report
from orchestrator.cli.sweep import cancel, db, resume, status, submit
from orchestrator.cli.train import train
from orchestrator.cli.ui import ui
from orchestrator.run import code_version


class OrchGroup(click.Group):
    def main(self, *args, **kwargs):  # noqa: D401 - click API
        kwargs.pop("standalone_mode", None)
        # `orch` however it was started (python -m orchestrator.cli too): usage lines and the
        # shell completion variable, _ORCH_COMPLETE
        kwargs.setdefault("prog_name", "orch")
        if not args and "args" not in kwargs:  # a real process: hide a --db password from ps
            kwargs["args"] = sys.argv[1:]
            if any("://" in a for a in kwargs["args"]):
                from orchestrator.secrets import (  # lazy: SQLAlchemy (db.session)
                    hide_in_cmdline,
                    passwords_in_args,
                )

                hide_in_cmdline(passwords_in_args(kwargs["args"]))
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except click.ClickException as e:
            click.echo(f"error: {e.format_message()}", err=True)
            sys.exit(2)
        except ConfigError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)


def version_text() -> str:
    """The package version and the code version every trial records (the git commit of this
    checkout, +dirty with uncommitted changes; orchestrator.run.trial.code_version)."""
    from importlib.metadata import (  # lazy: importlib.metadata (a third of orch's start-up)
        PackageNotFoundError,
        version,
    )

    try:
        text = f"orch {version('treespec-orch')}"
    except PackageNotFoundError:
        text = "orch (package not installed)"
    code = code_version()
    return text if code.startswith("treespec-orch ") else f"{text}, code version {code}"


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


@click.group(cls=OrchGroup)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version (and git commit, recorded with every trial) and exit.",
)
def main() -> None:
    """Tree speculative decoding: one generation, sweeps on Ray, results in SQL.

    \b
    Shell completion (bash, zsh, fish), e.g. in ~/.bashrc:
      eval "$(_ORCH_COMPLETE=bash_source orch)"
    (zsh: zsh_source, fish: fish_source; `orch` must be on PATH).
    Quote filters with < > ! for the shell: --where 'depth>=4'.
    """


for cmd in (
    generate,
    submit,
    status,
    query,
    compare,
    export,
    plot,
    report,
    certify,
    cancel,
    resume,
    delete,
    db,
    models,
    datasets,
    profile,
    profile_import,
    train,
    ui,
    tag,
    note,
):
    main.add_command(cmd)
