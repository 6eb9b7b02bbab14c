"""Reading MMS config.properties (Java Properties rules) into a ServerConfig."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmsctl.errors import ConfigError
from mmsctl.server.config import ServerConfig, load_properties, parse_address, parse_properties


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n! also a comment\n"
        "a=1\n"
        "b : two words \n"
        "c  spaced\n"
        "long=first,\\\n    second\n"
        "escaped\\=key=v\\u0041\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "two words ", "c": "spaced", "long": "first,second", "escaped=key": "vA",
    }


def test_mms_keys(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    props = tmp_path / "config.properties"
    props.write_text(
        "inference_address=http://0.0.0.0:9080\n"
        "management_address=http://127.0.0.1:9081\n"
        "model_store=store\n"
        "load_models=a.mar,b=squeezenet\n"
        "default_workers_per_model=3\njob_queue_size=5\nmax_request_size=1000\n"
        "default_response_timeout=9\nnumber_of_gpu=0\nsome_unknown_key=x\n"
    )
    cfg = load_properties(props).validate()
    assert cfg.inference_address == "http://0.0.0.0:9080"
    assert cfg.model_store == str(store)
    assert cfg.load_models == ["a.mar", "b=squeezenet"]
    assert (cfg.default_workers_per_model, cfg.job_queue_size, cfg.max_request_size,
            cfg.default_response_timeout) == (3, 5, 1000, 9)
    assert cfg.extra["some_unknown_key"] == "x"
    assert cfg.instance_name == "9080"
    assert ServerConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize("text, fragment", [
    ("job_queue_size=many\n", "job_queue_size"),
    ("inference_address=ftp://x:1\n", "inference_address"),
    ("inference_address=https://127.0.0.1:1\n", "HTTPS"),
    ("management_address=http://127.0.0.1:8080\n", "must differ"),
])
def test_bad_values_name_the_key(tmp_path: Path, text: str, fragment: str) -> None:
    props = tmp_path / "c.properties"
    props.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        load_properties(props).validate()


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_address("http://localhost:1234") == ("localhost", 1234)


def test_limits_are_read_from_config_properties(tmp_path: Path) -> None:
    props = tmp_path / "config.properties"
    props.write_text("worker_limit=6\nmax_image_pixels=1000\nmax_archive_size=2048\nmax_archive_members=7\n"
                     "request_header_timeout=2.5\nrequest_body_timeout=3\nlog_max_size=4096\nlog_backups=2\n")
    cfg = load_properties(props).validate()
    assert (cfg.worker_limit, cfg.workers_allowed, cfg.max_image_pixels, cfg.max_archive_size,
            cfg.max_archive_members) == (6, 6, 1000, 2048, 7)
    assert (cfg.request_header_timeout, cfg.request_body_timeout, cfg.log_max_size, cfg.log_backups) == \
        (2.5, 3.0, 4096, 2)
    assert ServerConfig.from_json(cfg.to_json()) == cfg


def test_the_default_worker_limit_follows_the_machine() -> None:
    import os

    import psutil

    limit = ServerConfig().workers_allowed
    assert 1 <= limit <= 4 * (os.cpu_count() or 1)
    assert limit <= psutil.virtual_memory().total // (256 * 1024**2)


@pytest.mark.parametrize("text, fragment", [
    ("worker_limit=0\n", "worker_limit must be an integer >= 1"),
    ("worker_limit=2\ndefault_workers_per_model=3\n", "over the worker limit"),
    ("request_header_timeout=nan\n", "request_header_timeout must be a number of seconds"),
    ("request_body_timeout=soon\n", "request_body_timeout must be a number of seconds"),
])
def test_bad_limits_name_the_key(tmp_path: Path, text: str, fragment: str) -> None:
    props = tmp_path / "c.properties"
    props.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        load_properties(props).validate()


def test_mms_request_and_handler_keys(tmp_path: Path) -> None:
    props = tmp_path / "config.properties"
    props.write_text("decode_input_request=FALSE\ndefault_service_handler = service:handle\n")
    cfg = load_properties(props).validate()
    assert (cfg.decode_input_request, cfg.default_service_handler) == (False, "service:handle")
    assert "decode_input_request" not in cfg.extra and ServerConfig.from_json(cfg.to_json()) == cfg
    assert ServerConfig().decode_input_request is True and ServerConfig().default_service_handler is None
    props.write_text("decode_input_request=no\n")
    with pytest.raises(ConfigError, match="decode_input_request must be true or false"):
        load_properties(props)
    props.write_text("default_service_handler=service:handle:twice\n")
    with pytest.raises(ConfigError, match="default_service_handler must be"):
        load_properties(props).validate()


@pytest.mark.parametrize("text, register, startup", [
    ("", 0, 1),  # not set: MMS's register starts no worker; a start-up model gets one
    ("default_workers_per_model=0\n", 0, 0),
    ("default_workers_per_model=2\n", 2, 2),
])
def test_default_workers_per_model_for_a_register_and_a_start_up_model(
        tmp_path: Path, text: str, register: int, startup: int) -> None:
    props = tmp_path / "config.properties"
    props.write_text(text)
    cfg = load_properties(props).validate()
    assert (cfg.register_workers, cfg.startup_workers) == (register, startup)
