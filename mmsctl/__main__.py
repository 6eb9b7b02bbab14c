"""``python -m mmsctl`` runs the CLI."""

from mmsctl.cli.main import run

run()
