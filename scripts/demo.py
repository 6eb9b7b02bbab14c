"""From nothing to a prediction: `mmsctl predict squeezenet kitten.jpg`.

Run by ``make demo`` (in the repository folder). It leaves the machine the way the
README's tour expects it:

* ``squeezenet`` works by name without a network: it is got the way a user would
  (cache, then the mirror in ``MMSCTL_ZOO_URL``, then the MMS model zoo); without
  internet the archive is built from the pretrained checkpoint in ``../shared`` and
  put in the cache as the zoo's ``squeezenet_v1.1.mar`` (its origin recorded);
* ``kitten.jpg`` and a ``photos/`` folder are in the current folder (git ignores them).

With neither internet nor ``../shared`` it builds SqueezeNet with untrained weights
into a mirror folder of its own — never into the cache, so it never passes for the
real model — and says how to use it. Works offline in a few seconds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
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
    """``kitten.jpg`` and ``photos/`` in the current folder, for the tour: the kitten from ../shared,
    or a generated picture where it is absent (said so)."""
    here = Path.cwd()
    target = here / "kitten.jpg"
    photos = here / "photos"
    photos.mkdir(exist_ok=True)
    found = [shared_dir() / "images" / n for n in ("kitten_small.jpg", "kitten_224.png")]
    found = [p for p in found if p.is_file()]
    if found:
        for image in found:
            if not (photos / image.name).exists():
                shutil.copyfile(image, photos / image.name)
        if not target.exists():
            shutil.copyfile(found[0], target)
        return target
    if not target.exists():
        from PIL import Image, ImageDraw

        image = Image.new("RGB", (224, 224), (250, 200, 120))
        draw = ImageDraw.Draw(image)
        draw.ellipse((40, 50, 184, 194), fill=(200, 120, 60))
        draw.polygon([(50, 80), (70, 20), (100, 60)], fill=(200, 120, 60))
        draw.polygon([(124, 60), (154, 20), (174, 80)], fill=(200, 120, 60))
        image.save(target, format="JPEG")
        say(f"no kitten picture in {shared_dir() / 'images'}: kitten.jpg is a generated one")
    if not any(photos.iterdir()):
        shutil.copyfile(target, photos / "kitten.jpg")
    return target


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


def cache_pretrained(workdir: Path, reason: str) -> Optional[Path]:
    """Build squeezenet_v1.1.mar from ../shared's pretrained checkpoint into the cache, as the zoo's
    archive (so ``squeezenet`` resolves offline from now on); None when there is no checkpoint."""
    from mmsctl.zoo import cache

    pretrained = shared_dir() / "models" / ARCH
    if not (pretrained / f"{ARCH}-symbol.json").is_file():
        return None
    say(f"{_what(reason)} ({_short(reason)}): using the pretrained checkpoint from {pretrained}")
    built = build_archive(pretrained, workdir / "built")
    target = cache.zoo_path(f"{ARCH}.mar")
    part = cache.new_part_file(target)
    shutil.copyfile(built, part)
    digest = hashlib.sha256(part.read_bytes()).hexdigest()
    cache.publish(part, target, url=pretrained.resolve().as_uri(), sha256=digest)
    say(f"cached it as the zoo's {ARCH}.mar ({target}): `mmsctl predict squeezenet …` now works offline")
    return target


def untrained_mirror(workdir: Path, reason: str) -> Path:
    """Make squeezenet_v1.1.mar with untrained weights in a mirror folder of its own; return the folder.

    It never goes into the cache, so it never passes for the real model.
    """
    from mmsctl.config import cache_dir
    from mmsctl.zoo.untrained import build_checkpoint

    mirror = cache_dir() / "demo" / "untrained"
    say(f"{_what(reason)} ({_short(reason)}) and no pretrained checkpoint in {shared_dir() / 'models' / ARCH}")
    say("building SqueezeNet v1.1 with [bold yellow]untrained weights[/]: "
        "[bold yellow]the classes below are meaningless[/]")
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
        if why is not None and cache_pretrained(workdir, why) is None:
            mirror = untrained_mirror(workdir, why)
            env["MMSCTL_ZOO_URL"] = str(mirror)
            prefix = f"MMSCTL_ZOO_URL={mirror} "
            say(f"mirror folder: {mirror}; the README's commands need `export {prefix.strip()}` first")
        say(f"mmsctl predict {MODEL} {image.name}")
        proc = subprocess.run([sys.executable, "-m", "mmsctl", "predict", MODEL, image.name], env=env)
        if proc.returncode == 0:
            say(f"done. Next, the README's tour: `{prefix}mmsctl serve start --models {MODEL}`, `mmsctl zoo list`")
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
