"""The handler's settings, read from its environment once, with a ceiling on every number."""

from __future__ import annotations

import pytest

from mmsctl.errors import ConfigError
from mmsctl.lambda_.settings import HandlerSettings


def test_settings_from_environment_with_ceilings() -> None:
    s = HandlerSettings.from_environ({"MMSCTL_LAMBDA_MODEL": "s3://b/m.mar", "MMSCTL_LAMBDA_MODEL_VERSION": "v9",
                                      "MMSCTL_LAMBDA_OUTPUT_BUCKET": "out", "MMSCTL_LAMBDA_TOP_K": "3",
                                      "MMSCTL_LAMBDA_BUCKET_OWNER": "123456789012"})
    assert s.model_from_s3 and (s.model_version, s.output_bucket, s.top_k) == ("v9", "out", 3)
    assert s.bucket_owner == "123456789012"
    assert s.max_image_bytes == 10 * 1024 * 1024 and s.url_timeout == 10.0
    with pytest.raises(ConfigError, match="MMSCTL_LAMBDA_MODEL is not set"):
        HandlerSettings.from_environ({})
    for key, value in (("MMSCTL_LAMBDA_MAX_IMAGE_BYTES", "999999999999"), ("MMSCTL_LAMBDA_TOP_K", "0"),
                       ("MMSCTL_LAMBDA_URL_TIMEOUT", "nan"), ("MMSCTL_LAMBDA_MAX_PIXELS", "many"),
                       ("MMSCTL_LAMBDA_BUCKET_OWNER", "12345"), ("MMSCTL_LAMBDA_BUCKET_OWNER", "１２３４５６７８９０１２")):
        with pytest.raises(ConfigError, match=key):
            HandlerSettings.from_environ({"MMSCTL_LAMBDA_MODEL": "/m", key: value})
