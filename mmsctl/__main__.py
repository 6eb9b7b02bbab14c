"""``python -m mmsctl`` runs the CLI (through the console entry: the lean ``predict`` first)."""

from mmsctl.cli.lean import run

if __name__ == "__main__":  # not when a spawned bench load process imports this module again
    run()
