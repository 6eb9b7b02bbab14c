"""`mmsctl top`: a live Textual monitor of a model server (imported only by that command)."""
