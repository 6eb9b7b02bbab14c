"""`mmsctl sagemaker`: managed endpoints (real-time or serverless) from the same archive and the same image."""

from mmsctl.cli.sagemaker.deploy import register

__all__ = ["register"]
