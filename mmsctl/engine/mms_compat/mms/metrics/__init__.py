"""``mms.metrics``: what a handler reports through ``context.metrics``."""
