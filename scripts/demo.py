"""From nothing to a prediction: `mmsctl predict squeezenet kitten.jpg`.

Run by ``make demo``. It gets SqueezeNet the way a user would (cache, then the
mirror in ``MMSCTL_ZOO_URL``, then the MMS model zoo). Without internet it
builds the archive itself: from the pretrained checkpoint in ``../shared`` if
there is one, else from a SqueezeNet with untrained weights (and says so),
puts it in a mirror folder and runs the real ``mmsctl predict`` against it.
Works offline in a few seconds.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as `python scripts/demo.py` from a checkout
    sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402

console = Console(highlight=False, soft_wrap=True)
MODEL = "squeezenet"
ARCH = "squeezenet_v1.1"


def shared_dir() -> Path:
    """../shared beside the repo, or MMSCTL_SHARED_DIR (same rule as tests/support/paths.py)."""
    return Path(os.environ.get("MMSCTL_SHARED_DIR", REPO.parent / "shared"))


def say(text: str) -> None:
    console.print(f"[bold cyan]==>[/] {text}")


def find_image(workdir: Path) -> Path:
    """The kitten from ../shared, or a generated picture where it is absent."""
    for name in ("kitten_small.jpg", "kitten_224.png"):
        candidate = shared_dir() / "images" / name
        if candidate.is_file():
            return candidate
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (224, 224), (250, 200, 120))
    draw = ImageDraw.Draw(image)
    draw.ellipse((40, 50, 184, 194), fill=(200, 120, 60))
    draw.polygon([(50, 80), (70, 20), (100, 60)], fill=(200, 120, 60))
    draw.polygon([(124, 60), (154, 20), (174, 80)], fill=(200, 120, 60))
    path = workdir / "generated.png"
    image.save(path)
    say(f"no kitten picture in {shared_dir() / 'images'}: using a generated one")
    return path


def try_zoo() -> Optional[str]:
    """Resolve the model through the cache / mirror / zoo; None on success, else why not."""
    from mmsctl.errors import ModelNotFoundError, ZooError
    from mmsctl.zoo import resolve_model

    # Fail fast where the network silently drops packets.
    os.environ.setdefault("MMSCTL_ZOO_TIMEOUT", "8")
    os.environ.setdefault("MMSCTL_ZOO_RETRIES", "1")
    try:
        model = resolve_model(MODEL, progress=True)
    except (ZooError, ModelNotFoundError) as exc:
        return exc.message
    where = {"cache": "from the cache", "download": "downloaded", "mirror": "from the mirror"}
    say(f"model {model.name}: {where.get(model.source, model.source)} ({model.path})")
    return None


def build_archive(checkpoint: Path, mirror: Path) -> Path:
    """`mmsctl archive create` the checkpoint folder into the mirror as squeezenet_v1.1.mar."""
    args = ["--model-path", str(checkpoint), "--model-name", ARCH, "--export-path", str(mirror), "--force"]
    if importlib.util.find_spec("mmsctl.cli.archive") is not None:
        proc = subprocess.run(
            [sys.executable, "-m", "mmsctl", "-q", "archive", "create", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if proc.returncode != 0:
            console.print(proc.stderr.strip())
            raise SystemExit(proc.returncode)
    else:  # the archive command is not built in this checkout: same thing through its API
        from mmsctl.archive import create_archive

        create_archive(checkpoint, model_name=ARCH, export_path=mirror, force=True)
    return mirror / f"{ARCH}.mar"


def local_model(workdir: Path, reason: str) -> Path:
    """Make squeezenet_v1.1.mar in a mirror folder without the network; return the folder.

    The folder stays (in the cache folder) so the user can go on with it; the
    untrained build gets its own, so it never passes for the real model.
    """
    from mmsctl.config import cache_dir

    why = f"{_what(reason)} ({_short(reason)})"
    pretrained = shared_dir() / "models" / ARCH
    if (pretrained / f"{ARCH}-symbol.json").is_file():
        say(f"{why}: using the pretrained checkpoint from {pretrained}")
        mirror = cache_dir() / "demo" / "pretrained"
        build_archive(pretrained, mirror)
    else:
        mirror = cache_dir() / "demo" / "untrained"
        say(f"{why} and no pretrained checkpoint in {pretrained}")
        say("building SqueezeNet v1.1 with [bold yellow]untrained weights[/]: "
            "[bold yellow]the classes below are meaningless[/]")
        from mmsctl.zoo.untrained import build_checkpoint

        build_archive(build_checkpoint(ARCH, workdir / "untrained"), mirror)
    return mirror


def main() -> int:
    say("mmsctl demo: classify a kitten with SqueezeNet v1.1")
    with tempfile.TemporaryDirectory(prefix="mmsctl-demo-") as tmp:
        workdir = Path(tmp)
        image = find_image(workdir)
        env = dict(os.environ)
        why = try_zoo()
        prefix = ""
        if why is not None:
            mirror = local_model(workdir, why)
            env["MMSCTL_ZOO_URL"] = str(mirror)
            prefix = f"MMSCTL_ZOO_URL={mirror} "
            say(f"mirror folder: {mirror}")
        say(f"mmsctl predict {MODEL} {image.name}")
        proc = subprocess.run([sys.executable, "-m", "mmsctl", "predict", MODEL, str(image)], env=env)
        if proc.returncode == 0:
            say(f"done. Next: `{prefix}mmsctl serve start --models {MODEL}`, `mmsctl zoo list`")
        return proc.returncode


def _short(reason: str) -> str:
    """A few words on why the zoo could not be used, from the resolver's one-line error."""
    import re

    if "offline" in reason and "MMSCTL_OFFLINE" in reason:
        return "MMSCTL_OFFLINE is set"
    found = re.search(r"(cannot reach|timed out connecting to|cannot connect to) ([^\s;]+)", reason)
    if found:
        return f"{found.group(1)} {found.group(2).rstrip(':')}"
    head = reason.split(";", 1)[0]
    return head if len(head) <= 80 else head[:77] + "..."


def _what(reason: str) -> str:
    """'no internet' where the network is the problem, else a plain 'the zoo download failed'."""
    words = ("offline", "cannot reach", "timed out connecting", "cannot connect")
    return "no internet" if any(w in reason for w in words) else "the zoo download failed"


if __name__ == "__main__":
    sys.exit(main())
