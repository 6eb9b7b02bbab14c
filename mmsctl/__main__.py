"""``python -m mmsctl`` runs the CLI."""

from mmsctl.cli.main import run

if __name__ == "__main__":  # not when a spawned bench load process imports this module again
    run()
