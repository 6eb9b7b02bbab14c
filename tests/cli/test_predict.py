"""`mmsctl predict`: inputs (files, folders, globs, stdin, URLs), output formats and exit codes."""

from __future__ import annotations

import http.server
import io
import json
import shutil
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl.cli.main import run
from tests.engine.helpers import build_tiny_checkpoint, handler_archive, png_bytes
from tests.support.cli import run_mmsctl
from tests.support.imageserver import StandInServer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny")


@pytest.fixture
def images(tmp_path: Path) -> Path:
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(3):
        (folder / f"img{i}.png").write_bytes(png_bytes(i))
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_table_output(capsys, tiny: Path, images: Path) -> None:
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), str(images / "img0.png"), "-k", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["INPUT", "RANK", "CLASS", "PROBABILITY"]
    assert len(lines) == 3 and lines[1].split()[1] == "1" and lines[2].split()[1] == "2"


def test_json_one_input_is_the_server_body(capsys, tiny: Path, images: Path) -> None:
    code, out, _ = run_mmsctl(capsys, "predict", str(tiny), str(images / "img1.png"), "-o", "json")
    assert code == 0
    body = json.loads(out)
    assert [set(e) for e in body] == [{"probability", "class"}] * 4
    assert out.startswith('[\n  {\n    "probability"')  # MMS's json.dumps(indent=2) layout


def test_folder_glob_and_order(capsys, tiny: Path, images: Path) -> None:
    code, out, _ = run_mmsctl(capsys, "predict", str(tiny), str(images), "-o", "json")
    assert code == 0
    got = json.loads(out)
    assert [g["input"] for g in got] == [str(images / f"img{i}.png") for i in range(3)]
    assert all(g["status"] == 200 and len(g["result"]) == 4 for g in got)
    code, out, _ = run_mmsctl(capsys, "predict", str(tiny), str(images / "img[02].png"), "-o", "jsonl")
    assert code == 0
    assert [json.loads(l)["input"] for l in out.splitlines()] == [str(images / "img0.png"), str(images / "img2.png")]


def test_batched_answers_equal_single_ones(capsys, tiny: Path, images: Path) -> None:
    _, together, _ = run_mmsctl(capsys, "predict", str(tiny), str(images), "-o", "json", "-b", "3")
    _, alone, _ = run_mmsctl(capsys, "predict", str(tiny), str(images / "img2.png"), "-o", "json")
    a, b = json.loads(together)[2]["result"], json.loads(alone)
    assert [e["class"] for e in a] == [e["class"] for e in b]
    assert all(abs(x["probability"] - y["probability"]) < 1e-5 for x, y in zip(a, b))


def test_stdin(capsys, tiny: Path) -> None:
    code, out, _ = run_mmsctl(capsys, "predict", str(tiny), "-", "-o", "json", stdin=png_bytes(5))
    assert code == 0 and len(json.loads(out)) == 4


def test_missing_file_fails_before_loading(capsys, tiny: Path, tmp_path: Path) -> None:
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), str(tmp_path / "nope.jpg"))
    assert code == 3 and out == ""
    assert err.strip() == f"error: {tmp_path / 'nope.jpg'}: no such file or folder"


def test_corrupt_single_image_is_one_line(capsys, tiny: Path, images: Path) -> None:
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), str(images / "notes.txt"))
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        f"error: {images / 'notes.txt'}: Corrupted image input: Decoding failed. Invalid image file."
    ]


def test_partial_failure_prints_the_good_ones(capsys, tiny: Path, images: Path) -> None:
    args = [str(images / "img0.png"), str(images / "notes.txt"), str(images / "gone.png"), str(images / "img1.png")]
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), *args, "-o", "json")
    assert code == 4
    got = json.loads(out)
    assert [g["status"] for g in got] == [200, 400, 0, 200]
    assert got[1]["error"]["type"] == "BadRequestException"
    assert "no such file" in got[2]["error"]["message"]
    assert "error: 2 of 4 inputs failed" in err
    assert f"{images / 'gone.png'}: no such file or folder" in err


def test_unknown_model(capsys, tmp_path: Path, images: Path) -> None:
    code, out, err = run_mmsctl(capsys, "predict", str(tmp_path / "no-model.mar"), str(images / "img0.png"))
    assert code == 3 and out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) <= 2


def test_bad_handler_is_one_line(capsys, tmp_path: Path, images: Path) -> None:
    archive = handler_archive(tmp_path / "m", {"h.py": "import no_such_dependency_q\n"}, handler="h:handle")
    code, _, err = run_mmsctl(capsys, "predict", str(archive.root), str(images / "img0.png"))
    assert code == 1
    assert err.strip().splitlines()[0].startswith("error: handler module 'h' failed to import")


def test_a_handler_flag_that_names_nothing_says_the_flag_is_wrong(capsys, tmp_path: Path, images: Path) -> None:
    """`--handler nosuch`: the value typed is what to fix, not the manifest (nor the archive's cache folder)."""
    archive = handler_archive(tmp_path / "m", {"h.py": "def handle(d, c):\n    return d\n"}, handler="h:handle")
    code, _, err = run_mmsctl(capsys, "predict", str(archive.root), str(images / "img0.png"), "--handler", "nosuch")
    lines = err.strip().splitlines()
    assert code == 1 and lines[0] == ("error: handler module 'nosuch' not found: no such module in the archive and "
                                      "no such .py file (--handler)"), lines
    assert "manifest" not in err and str(archive.root) not in err


def test_custom_handler_text_output(capsys, tmp_path: Path, images: Path) -> None:
    src = "def handle(d, c):\n    return None if d is None else ['%d bytes' % len(x['body']) for x in d]\n"
    archive = handler_archive(tmp_path / "m", {"h.py": src}, handler="h:handle")
    size = (images / "img0.png").stat().st_size
    code, out, _ = run_mmsctl(capsys, "predict", str(archive.root), str(images / "img0.png"), "-o", "json")
    assert code == 0 and out == f"{size} bytes\n"


def test_gpu_without_cuda(capsys, tiny: Path, images: Path) -> None:
    from mmsctl.engine.mxnet_compat import import_mxnet

    if import_mxnet().context.num_gpus() > 0:
        pytest.skip("a GPU is visible here")
    code, _, err = run_mmsctl(capsys, "predict", str(tiny), str(images / "img0.png"), "--gpu", "0")
    assert code == 1 and "no GPU available" in err
    assert err.splitlines()[0].endswith("(--gpu)")  # the engine names gpu_id, the CLI its flag


def test_a_model_without_a_handler_gets_the_flag_as_a_hint(capsys, tmp_path: Path,
                                                            images: Path) -> None:
    archive = handler_archive(tmp_path / "m", {"notes.txt": "no handler, no checkpoint"}, handler=None)
    code, _, err = run_mmsctl(capsys, "predict", str(archive.root), str(images / "img0.png"))
    lines = err.strip().splitlines()
    assert code == 1 and "names no handler" in lines[0]
    assert lines[1] == "hint: pass --handler module:function, or set one with `mmsctl archive create --handler`"


def test_a_dead_worker_is_one_line_with_the_workers_hint(capsys, tmp_path: Path,
                                                         images: Path) -> None:
    src = "import os\n\ndef handle(d, c):\n    if d is not None:\n        os._exit(3)\n"
    archive = handler_archive(tmp_path / "m", {"h.py": src}, handler="h:handle")
    code, _, err = run_mmsctl(capsys, "predict", str(archive.root), str(images), "--workers", "2")
    lines = err.strip().splitlines()
    assert lines[0] == f"warning: {images}: skipped 1 file that is not an image by name: notes.txt"
    assert code == 1 and lines[1].startswith("error: predict worker ") and "exit code 3) died" in lines[1], err
    assert lines[2:] == ["hint: run again with --workers 1 to see the error in this process"]


def test_bad_output_format(capsys, tiny: Path, images: Path) -> None:
    code, _, err = run_mmsctl(capsys, "predict", str(tiny), str(images / "img0.png"), "-o", "xml")
    assert code == 2 and "unknown output format" in err


@pytest.fixture
def image_server(images: Path) -> Iterator[str]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(images), **kw)

        def log_message(self, *a: object) -> None:
            pass

    server = StandInServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _loopback_servers_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests' URL inputs are servers on loopback, opened on purpose (tests/predict/test_fetch.py refuses)."""
    monkeypatch.setenv("MMSCTL_FETCH_ALLOW", "127.0.0.1")


def test_url_inputs(capsys, monkeypatch, tiny: Path, images: Path, image_server: str) -> None:
    monkeypatch.delenv("MMSCTL_FETCH_ALLOW")
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), f"{image_server}/img0.png", "-o", "json")
    assert code != 0 and "127.0.0.1 is a loopback address" in out + err and "MMSCTL_FETCH_ALLOW" in out + err
    monkeypatch.setenv("MMSCTL_FETCH_ALLOW", "127.0.0.1")  # the test's image server, opened on purpose
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), f"{image_server}/img0.png",
                                f"{image_server}/missing.png", "-o", "json")
    assert code == 4
    got = json.loads(out)
    assert got[0]["status"] == 200 and len(got[0]["result"]) == 4
    assert "HTTP 404" in got[1]["error"]["message"]
    _, local, _ = run_mmsctl(capsys, "predict", str(tiny), str(images / "img0.png"), "-o", "json")
    # The same classes in the same order; the probabilities to float32 noise: two inputs may run in a
    # worker pool and one in this process, each with the kernel set it chose (MKL-DNN or not).
    expected = json.loads(local)
    assert [r["class"] for r in got[0]["result"]] == [r["class"] for r in expected]
    assert [r["probability"] for r in got[0]["result"]] == pytest.approx([r["probability"] for r in expected],
                                                                          abs=1e-5)


def test_empty_folder(capsys, tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = run_mmsctl(capsys, "predict", str(tiny), str(tmp_path / "empty"))
    assert code == 2 and "no images" in err


def test_squeezenet_kitten(capsys, squeezenet_dir: Path, kitten_png: Path, tmp_path: Path) -> None:
    link = tmp_path / "squeezenet_v1.1"
    link.symlink_to(squeezenet_dir)
    code, out, _ = run_mmsctl(capsys, "predict", str(link), str(kitten_png), "-o", "json", "-k", "1")
    assert code == 0
    assert json.loads(out)[0]["class"] in {"n02123045 tabby, tabby cat", "n02123159 tiger cat"}
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    monkeypatch.setenv("TERM", "xterm-256color")  # rich draws nothing live on a "dumb" one (CI may set it)

    from mmsctl.cli.predict import _emit
    from mmsctl.cli.render import UI
    from mmsctl.predict import Prediction

    def answers() -> Iterator[Prediction]:
        for i in range(3):
            yield Prediction(f"in{i}", 200, b'[{"probability": 0.5, "class": "c"}]')

    for terminal, expect_bar in ((True, True), (False, False)):
        out, err = io.StringIO(), io.StringIO()
        ui = UI(out=Console(file=out, force_terminal=False, width=100),
                err=Console(file=err, force_terminal=terminal, width=100))
        _emit(ui, "jsonl", 3, answers())
        assert [json.loads(l)["input"] for l in out.getvalue().splitlines()] == ["in0", "in1", "in2"]
        assert ("predict" in err.getvalue()) is expect_bar


def test_binary_answer_is_written_as_is(capsys, monkeypatch, tmp_path: Path, images: Path) -> None:
    src = "def handle(d, c):\n    return None if d is None else [b'\\x89PNG\\xff\\x00' for _ in d]\n"
    archive = handler_archive(tmp_path / "m", {"h.py": src}, handler="h:handle")
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    try:
        run(["predict", str(archive.root), str(images / "img0.png"), "-o", "json"])
    except SystemExit as exc:
        assert not exc.code
    sys.stdout.flush()
    assert out.getvalue() == b"\x89PNG\xff\x00"


@pytest.fixture
def fake_server() -> Iterator[tuple[str, list]]:
    """A tiny MMS look-alike: classifies by body length, refuses bodies starting with b'bad'."""
    seen: list = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append((self.path, self.headers.get("Content-Type")))
            if body.startswith(b"bad"):
                status, answer = 400, {"code": 400, "type": "BadRequestException", "message": "bad input"}
            else:
                status = 200
                answer = [{"probability": 1.0 / (r + 1), "class": f"len{len(body)}-{r}"} for r in range(5)]
            data = json.dumps(answer, indent=2).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a: object) -> None:
            pass

    server = StandInServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_context_sends_each_input_in_order(capsys, tmp_path: Path, fake_server) -> None:
    url, seen = fake_server
    code, _, err = run_mmsctl(capsys, "context", "add", "fake", "--inference", url, "--management", url)
    assert code == 0, err
    files = []
    for i in range(7):
        f = tmp_path / f"f{i}.png"
        f.write_bytes(b"bad" if i == 3 else b"x" * (10 + i))
        files.append(str(f))
    code, out, err = run_mmsctl(capsys, "--context", "fake", "predict", "mymodel", *files, "-o", "json", "-k", "2")
    assert code == 4
    got = json.loads(out)
    assert [g["input"] for g in got] == files
    assert [g["status"] for g in got] == [200, 200, 200, 400, 200, 200, 200]
    assert got[0]["result"] == [{"probability": 1.0, "class": "len10-0"}, {"probability": 0.5, "class": "len10-1"}]
    assert got[6]["result"][0]["class"] == "len16-0"
    assert {p for p, _ in seen} == {"/predictions/mymodel"} and {ct for _, ct in seen} == {"image/png"}
    assert "f3.png: " in err and "bad input" in err


def test_context_unreachable_is_one_line(capsys, images: Path) -> None:
    from tests.support.mmsctl_server import free_port

    url = f"http://127.0.0.1:{free_port()}"
    run_mmsctl(capsys, "context", "add", "gone", "--inference", url, "--management", url)
    code, out, err = run_mmsctl(capsys, "predict", "--context", "gone", "m", str(images / "img0.png"),
                                str(images / "img1.png"))
    assert code == 5 and out == ""
    assert err.startswith("error: ")


def test_help_paragraphs_are_reflowed(capsys, monkeypatch) -> None:
    """Hard line breaks inside a help paragraph showed as ragged half-lines in a terminal."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_mmsctl(capsys, "predict", "--help")
    assert code == 0
    lines = out.splitlines()
    paragraph = lines[lines.index("  MODEL is a zoo name (squeezenet) or a path: a .mar/.tar.gz/.model archive, a"):]
    paragraph = paragraph[:paragraph.index("")]
    assert all(len(line) > 60 for line in paragraph[:-1])  # filled lines, no ragged half-lines
    text = " ".join(out.split())
    assert "a model folder or an MXNet checkpoint folder" in text
    assert "write ./NAME for the folder" in text
    assert "so the answer is what `curl -T INPUT http://host:8080/predictions/MODEL`" in text


def test_answers_that_are_not_classes_are_not_put_under_rank_class_probability(
        capsys, tmp_path: Path) -> None:
    from tests.support.mmsctl_server import make_noop_archive

    echo = make_noop_archive(tmp_path / "echo")
    for name, body in (("a.txt", "hello"), ("b.txt", '{"sum": 6}')):
        (tmp_path / name).write_text(body)
    code, out, err = run_mmsctl(capsys, "predict", str(echo), str(tmp_path / "a.txt"),
                                str(tmp_path / "b.txt"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["INPUT", "RESULT"]
    assert lines[1].split() == [str(tmp_path / "a.txt"), "hello"]
    assert lines[2].split(None, 1) == [str(tmp_path / "b.txt"), '{"sum": 6}']


def test_a_url_input_that_cannot_be_fetched_is_one_plain_line(capsys, monkeypatch, tiny: Path) -> None:
    from tests.support.mmsctl_server import free_port


    where = f"127.0.0.1:{free_port()}"
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), f"http://{where}/x.png")
    assert code == 1 and out == ""
    assert err.splitlines() == [f"error: http://{where}/x.png: cannot connect to {where}: connection refused"]


def test_a_host_that_does_not_resolve_reads_as_such() -> None:
    """What a DNS failure looks like (built here: tests never ask a resolver beyond loopback)."""
    import socket

    import httpx

    from mmsctl.zoo.download import failure_reason

    try:
        raise httpx.ConnectError("[Errno -2] Name or service not known") from socket.gaierror(-2, "x")
    except httpx.ConnectError as exc:
        assert failure_reason(exc, "nohost.invalid") == "cannot reach nohost.invalid: Name or service not known"
    assert "ConnectError" not in failure_reason(httpx.ConnectTimeout("t"), "h")


def test_an_input_url_is_read_only_up_to_its_cap(tmp_path: Path) -> None:
    """A URL input is an image, not whatever the far end streams: the read stops at the cap."""
    from mmsctl.errors import DownloadError
    from mmsctl.predict.fetch import fetch_url
    from tests.support.http_mirror import serving_folder

    (tmp_path / "big.jpg").write_bytes(b"\xff\xd8" + bytes(50_000))
    with serving_folder(tmp_path) as mirror:
        assert len(fetch_url(mirror.url_for("big.jpg"), max_bytes=60_000)) == 50_002
        with pytest.raises(DownloadError, match="more than the 10000 allowed"):
            fetch_url(mirror.url_for("big.jpg"), max_bytes=10_000)


#: Formats Pillow can open here that a folder of photos does not pick up, and why.
NOT_PHOTOS = {
    ".bufr": "a stub: needs a handler Pillow does not ship", ".grib": "a stub", ".h5": "a stub", ".hdf": "a stub",
    ".eps": "needs Ghostscript", ".ps": "needs Ghostscript", ".wmf": "Windows only", ".emf": "Windows only",
    ".mpg": "only identified, never decoded", ".mpeg": "only identified, never decoded",
}


def test_a_folder_picks_up_every_format_the_decoder_reads() -> None:
    """``predict DIR`` reads what ``predict FILE`` reads: every suffix of a format Pillow opens (and HEIC/HEIF
    through pillow-heif), but a stub or a format that needs another program."""
    import pillow_heif
    from PIL import Image

    from mmsctl.predict.inputs import IMAGE_SUFFIXES

    Image.init()
    pillow_heif.register_heif_opener()  # as the decoder does at its first HEIF image (engine/imaging.py)
    readable = {ext for ext, fmt in Image.registered_extensions().items() if fmt in Image.OPEN}
    assert readable - set(NOT_PHOTOS) <= IMAGE_SUFFIXES, sorted(readable - set(NOT_PHOTOS) - IMAGE_SUFFIXES)
    assert IMAGE_SUFFIXES <= readable, sorted(IMAGE_SUFFIXES - readable)
    assert not IMAGE_SUFFIXES & set(NOT_PHOTOS)


def test_a_folder_of_heic_photos_is_read_and_what_a_folder_skips_is_named(capsys, tiny: Path,
                                                                          tmp_path: Path) -> None:
    import io

    import pillow_heif
    from PIL import Image

    pillow_heif.register_heif_opener()
    iphone = tmp_path / "iphone"
    iphone.mkdir()
    for name in ("IMG_0001.HEIC", "IMG_0002.heif"):
        out = io.BytesIO()
        Image.new("RGB", (40, 30), (180, 40, 20)).save(out, format="HEIF")
        (iphone / name).write_bytes(out.getvalue())
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), str(iphone), "-o", "jsonl")
    assert code == 0 and err == "", err
    assert [json.loads(line)["input"] for line in out.splitlines()] == [str(iphone / "IMG_0001.HEIC"),
                                                                         str(iphone / "IMG_0002.heif")]
    (iphone / "notes.txt").write_text("not a photo")
    (iphone / "IMG_0001.AAE").write_text("<plist/>")  # an iPhone's edit sidecar
    (iphone / ".DS_Store").write_bytes(b"\0")
    code, out, err = run_mmsctl(capsys, "predict", str(tiny), str(iphone), "-o", "jsonl", "-q")
    assert code == 0 and len(out.splitlines()) == 2
    assert err.splitlines() == [f"warning: {iphone}: skipped 2 files that are not an image by name: IMG_0001.AAE, "
                                "notes.txt"]
