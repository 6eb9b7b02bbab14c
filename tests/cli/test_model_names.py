"""A zoo name vs a folder of the same name here: one rule (`mmsctl.names.model_location`) everywhere.

`archive extract squeezenet.mar` leaves a ./squeezenet folder; a word still means the zoo's model
in `predict`, `zoo pull`, `serve start --models`, `ec2 launch --models` and `fleet create --models`,
`./squeezenet` means the folder, and where both exist mmsctl says which one it used.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.names import model_location
from tests.engine.helpers import build_tiny_checkpoint, png_bytes
from tests.support.cli import one_error_line, run_mmsctl

NOTE = "note: squeezenet is the zoo model; for the local folder ./squeezenet, write ./squeezenet"


def _labelled(folder: Path, label: str) -> Path:
    build_tiny_checkpoint(folder)
    (folder / "synset.txt").write_text("".join(f"{label} {i}\n" for i in range(4)))
    return folder


@pytest.fixture(scope="module")
def zoo_and_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A zoo mirror folder whose squeezenet_v1.1.mar says "zoo …", and a ./squeezenet checkpoint saying "folder …"."""
    from mmsctl.archive import create_archive

    root = tmp_path_factory.mktemp("names")
    mirror = root / "mirror"
    create_archive(_labelled(root / "zoo-src", "zoo"), model_name="squeezenet_v1.1", export_path=mirror)
    _labelled(root / "work" / "squeezenet", "folder")
    (root / "work" / "cat.png").write_bytes(png_bytes(1))
    return mirror, root / "work"


@pytest.fixture
def here(zoo_and_folder: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    mirror, work = zoo_and_folder
    monkeypatch.setenv("MMSCTL_ZOO_URL", str(mirror))
    monkeypatch.chdir(work)
    return work


@pytest.mark.parametrize("text, kind, value, name", [
    ("squeezenet", "zoo", "squeezenet", None),
    ("sq=squeezenet", "zoo", "squeezenet", "sq"),
    ("./squeezenet", "path", "./squeezenet", None),
    ("models/squeezenet", "path", "models/squeezenet", None),
    ("/abs/m", "path", "/abs/m", None),
    ("~/m", "path", "~/m", None),
    ("resnet-18.mar", "path", "resnet-18.mar", None),
    ("m.tar.gz", "path", "m.tar.gz", None),
    ("file:///x/m.mar", "path", "file:///x/m.mar", None),
    ("https://h/m.mar", "url", "https://h/m.mar", None),
    ("r=https://h/m.mar?a=b", "url", "https://h/m.mar?a=b", "r"),
])
def test_the_one_rule(text: str, kind: str, value: str, name: str) -> None:
    where = model_location(text)
    assert (where.kind, where.value, where.name) == (kind, value, name)


def test_a_word_is_the_zoo_even_with_a_folder_of_that_name(here: Path) -> None:
    assert model_location("squeezenet").shadowed == "squeezenet"
    assert model_location("resnet-18").shadowed is None
    assert model_location("./squeezenet").shadowed is None


def test_predict_a_word_is_the_zoo_and_says_so_a_path_is_the_folder(here: Path, capsys) -> None:
    code, out, err = run_mmsctl(capsys, "predict", "squeezenet", "cat.png", "-o", "json")
    assert code == 0, err
    assert {c["class"].split()[0] for c in json.loads(out)} == {"zoo"}
    assert NOTE in err
    code, out, err = run_mmsctl(capsys, "predict", "./squeezenet", "cat.png", "-o", "json")
    assert code == 0, err
    assert {c["class"].split()[0] for c in json.loads(out)} == {"folder"} and "note:" not in err


def test_a_word_the_zoo_does_not_have_points_at_the_folder(here: Path, capsys, monkeypatch) -> None:
    (here / "mymodel").mkdir(exist_ok=True)
    r = run_mmsctl(capsys, "predict", "mymodel", "cat.png")
    assert r.code == 3 and "mymodel" in one_error_line(r)
    assert r.stderr.splitlines()[-1] == "hint: ./mymodel is a local folder: write ./mymodel for it"


def test_zoo_commands_always_mean_the_zoo(here: Path, capsys) -> None:
    code, out, err = run_mmsctl(capsys, "zoo", "pull", "squeezenet", "-o", "json")
    assert code == 0, err
    (pulled,) = json.loads(out)
    assert pulled["source"] == "mirror" and pulled["path"].endswith("mirror/squeezenet_v1.1.mar")
    r = run_mmsctl(capsys, "zoo", "pull", "./squeezenet")
    assert r.code == 2 and one_error_line(r) == "error: './squeezenet' is not a zoo name or an http(s) URL"


def test_serve_start_keeps_a_word_for_the_zoo_and_makes_a_path_absolute(here: Path) -> None:
    from mmsctl.server.control import build_config

    config = build_config(models=["squeezenet", "./squeezenet", "sq=./squeezenet", "r=https://h/m.mar"],
                          model_store=None, config_file=None, inference_address=None, management_address=None,
                          metrics_address=None, workers=None, token_file=None, name=None)
    folder = str(here / "squeezenet")
    # a zoo model is served under the name typed (/predictions/squeezenet), as on EC2
    assert config.load_models == ["squeezenet=squeezenet", folder, f"sq={folder}", "r=https://h/m.mar"]


def test_a_start_up_model_found_in_the_model_store_is_named_by_its_manifest(here: Path, tmp_path: Path) -> None:
    """``load_models=noop-v0.1`` names the model after its manifest (``noop_v0.1``), as MMS does; a zoo word that
    is not in the store keeps its name."""
    from mmsctl.server.control import build_config

    store = tmp_path / "store"
    (store / "noop-v0.1").mkdir(parents=True)
    props = tmp_path / "config.properties"
    props.write_text(f"model_store={store}\nload_models=noop-v0.1,squeezenet,mine=noop-v0.1\n")
    config = build_config(models=[], model_store=None, config_file=props, inference_address=None,
                          management_address=None, metrics_address=None, workers=None, token_file=None, name=None)
    assert config.load_models == ["noop-v0.1", "squeezenet=squeezenet", "mine=noop-v0.1"]


def test_a_typo_of_a_zoo_name_is_offered_the_name_in_predict_and_in_serve_start(here: Path, capsys,
                                                                               monkeypatch) -> None:
    monkeypatch.delenv("MMSCTL_ZOO_URL")  # the zoo's catalog, nothing cached, no mirror
    typo = run_mmsctl(capsys, "predict", "squeeznet", "cat.png")
    assert typo.code == 3 and "did you mean 'squeezenet' or 'onnx-squeezenet'" in one_error_line(typo)
    started = run_mmsctl(capsys, "serve", "start", "--models", "squeezenett", "-p", "18000")
    assert started.code == 3 and one_error_line(started) == (
        "error: unknown model 'squeezenett': not in the model zoo and not a file, folder or URL; did you mean "
        "'squeezenet' or 'onnx-squeezenet'?")
    assert run_mmsctl(capsys, "serve", "status", "-o", "json").stdout.strip() == "[]"  # nothing was started
    monkeypatch.setenv("MMSCTL_ZOO_URL", str(here))  # a mirror folder without it: said so, still offered
    mirrored = run_mmsctl(capsys, "serve", "start", "--models", "squeezenett", "-p", "18000")
    assert mirrored.code == 3 and f"not in the model zoo or the mirror folder {here}" in one_error_line(mirrored)


def test_a_local_model_that_is_not_there_is_refused_before_serve_start_starts(here: Path, capsys) -> None:
    """`-m ./nosuch.mar` (and a file:// URL) is exit 3 naming the flag, and no server is started to say it later."""
    for given in ("./nosuch.mar", "own=./nosuch.mar", f"file://{here}/nosuch.mar"):
        started = run_mmsctl(capsys, "serve", "start", "-m", given, "-p", "18000")
        location = given.split("=")[-1]
        assert (started.code, one_error_line(started)) == (3, f"error: {location}: no such file or folder (--models)")
    assert run_mmsctl(capsys, "serve", "status", "-o", "json").stdout.strip() == "[]"


def test_ec2_launch_sends_the_zoo_name_and_refuses_the_folder(here: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(here))  # no AWS config: the dry run plans without looking
    code, out, err = run_mmsctl(capsys, "ec2", "launch", "--models", "squeezenet", "--dry-run", "-o", "json")
    assert code == 0, err
    assert NOTE in err
    code, out, err = run_mmsctl(capsys, "ec2", "launch", "--models", "./squeezenet", "--dry-run", "-o", "json")
    assert code == 0, err  # the folder goes to the asset bucket, under the launch's prefix
    puts = [c["parameters"] for c in json.loads(out)["calls"] if c["operation"] == "PutObject"]
    assert (puts[0]["Key"], puts[0]["Body"]) == ("ec2/mmsctl-squeezenet/models/<sha256>/squeezenet.mar", "<squeezenet>")
    r = run_mmsctl(capsys, "ec2", "launch", "--models", "./squeezenet", "--pip-spec", "mmsctl", "--dry-run")
    assert r.code == 2 and "a local file is not on the instance" in one_error_line(r)


def test_fleet_create_uploads_the_zoo_model_and_the_folder_as_assets(here: Path, capsys, monkeypatch) -> None:
    """The zoo name is the zoo's model, the folder is the folder: each goes to the asset bucket under its name."""
    monkeypatch.setenv("HOME", str(here))
    for given in ("squeezenet", "./squeezenet"):
        code, out, err = run_mmsctl(capsys, "fleet", "create", "demo", "--models", given, "--dry-run", "-o", "json")
        assert code == 0, err
        puts = [c["parameters"] for c in json.loads(out)["calls"] if c["operation"] == "PutObject"]
        assert puts[0]["Key"] == "fleet/demo/models/<sha256>/squeezenet.mar", puts
        assert puts[0]["Body"] == f"<{Path(given).name}>"
