"""`mmsctl lambda`: predictions on AWS Lambda, over HTTP and as an S3 event pipeline."""

from mmsctl.cli.lambda_.deploy import register

__all__ = ["register"]
