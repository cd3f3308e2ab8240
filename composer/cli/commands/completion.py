"""``composer completion SHELL``: print the tab-completion script of every command for bash,
zsh or fish (``composer.cli.completion`` writes it from the parser)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from composer.cli.completion import SHELLS, completion_script
from composer.cli.exit_codes import SUCCESS

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Print a tab-completion script for SHELL: commands, options, their choices, and paths "
    "where an argument names a file or folder. Load it in this shell with "
    "'source <(composer completion bash)', or install it once: bash, into "
    "~/.local/share/bash-completion/completions/composer; zsh, as _composer in a folder of "
    "$fpath; fish, into ~/.config/fish/completions/composer.fish."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to write the script for")


def run(args: argparse.Namespace, output: Output) -> int:
    output.block(completion_script(args.shell, args.whole_parser()).rstrip("\n"))
    return SUCCESS
