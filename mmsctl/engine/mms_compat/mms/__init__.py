"""MMS 1.1.11's Python API for handlers and legacy services, as mmsctl's engine runs them (see
:mod:`mmsctl.engine.mms_compat`)."""

#: The MMS release whose API this package implements.
__version__ = "1.1.11"
