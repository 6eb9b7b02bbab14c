"""Reusable widgets of `mmsctl top`: each renders part of a Snapshot."""
