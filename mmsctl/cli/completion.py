"""`mmsctl completion bash|zsh|fish|powershell`: print the shell completion script.

The scripts come from typer's completion machinery (click's ``shell_complete``
with typer's shells, PowerShell included): the shell calls ``mmsctl`` back with
``_MMSCTL_COMPLETE=complete_<shell>``, and mmsctl answers with subcommands,
options, context names and, for MODEL arguments, the model names of the current
context's server. Copies live in ``completions/`` (``scripts/gen_completions.py``
regenerates them; a test keeps them in sync).
"""

from __future__ import annotations

from enum import Enum

import typer

__all__ = ["PROG", "COMPLETE_VAR", "SHELLS", "completion_script", "register"]

PROG = "mmsctl"
COMPLETE_VAR = "_MMSCTL_COMPLETE"
#: shell -> file name in completions/
SHELLS = {"bash": "mmsctl.bash", "zsh": "_mmsctl", "fish": "mmsctl.fish", "powershell": "mmsctl.ps1"}


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    powershell = "powershell"


def completion_script(shell: str) -> str:
    """The completion script for *shell* (one of :data:`SHELLS`), ending with a newline."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell) + "\n"


def completion(
    shell: Shell = typer.Argument(..., help="bash, zsh, fish or powershell.", metavar="SHELL", case_sensitive=False),
) -> None:
    """Print the completion script for SHELL.

    Load it now with `source <(mmsctl completion bash)`; for every new shell add
    that line to ~/.bashrc (zsh: `mmsctl completion zsh > "${fpath[1]}/_mmsctl"`,
    fish: `mmsctl completion fish > ~/.config/fish/completions/mmsctl.fish`,
    PowerShell: `mmsctl completion powershell | Out-String | Invoke-Expression` in $PROFILE).
    """
    import sys

    sys.stdout.write(completion_script(shell.value))
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    # Typer registers its shells (PowerShell too) only when add_completion=True; the root
    # turns that off (no --install-completion flags), so register them here.
    from typer._completion_classes import completion_init

    completion_init()
    app.command("completion")(completion)
