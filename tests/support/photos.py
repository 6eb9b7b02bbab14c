"""A photo corpus as people send them, made deterministically from kitten_224.png in ../shared.

    items = make_corpus(folder)          # writes once; a second call reuses what is there

Every item is made from one "master": the kitten upscaled (bicubic) to a phone's 4032x3024, with
seeded grain so that it compresses like a real 12 MP photo (3-4 MB at quality 92). Each item is
a file and its ``reference``: the file whose plain full-size decode (Pillow, EXIF applied) is the
picture the item shows: the item itself, or for alpha and 16-bit PNGs a lossless 8-bit RGB one. HEIC and the PNGs are 1008x756 (x265 needs minutes
for 12 MP here; a 16-bit 12 MP PNG is 70 MB), the CMYK JPEG 2016x1512 (11 MB at 12 MP). Used by tests/photos and bench/photos.py.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from tests.support.paths import KITTEN_PNG, require_shared

__all__ = ["CORPUS_VERSION", "PHONE", "Photo", "make_corpus", "make_master"]

CORPUS_VERSION = 3
PHONE = (4032, 3024)
HALF = (2016, 1512)
SMALL = (1008, 756)
GRAIN = 8.0  # standard deviation of the grain, in 0..255 levels
QUALITY = 92


@dataclass(frozen=True)
class Photo:
    """One corpus item; *reference* is None for the items that must be refused (then *status*)."""

    name: str
    file: str
    kind: str
    reference: Optional[str] = None
    status: int = 200


def make_master(size: tuple[int, int] = PHONE, seed: int = 0) -> Any:
    """The upright picture every item is made from: an RGB PIL image of *size*."""
    import numpy as np
    from PIL import Image

    src = Image.open(require_shared(KITTEN_PNG)).convert("RGB").resize(size, Image.Resampling.BICUBIC)
    grain = np.random.default_rng(seed).standard_normal((size[1], size[0], 3), dtype=np.float32) * GRAIN
    pixels = np.clip(np.asarray(src, dtype=np.float32) + grain, 0, 255)
    return Image.fromarray(np.rint(pixels).astype(np.uint8), "RGB")


def _jpeg(im: Any, path: Path, **options: Any) -> None:
    im.save(path, "JPEG", quality=options.pop("quality", QUALITY), **options)


def _exif(orientation: int) -> bytes:
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def _png16(rgb: Any, path: Path) -> None:
    """An RGB PNG of bit depth 16 (Pillow writes 16 bits only for greyscale): each level v as v*257."""
    import numpy as np

    wide = np.asarray(rgb, dtype=np.uint16) * 257
    rows = wide.astype(">u2").reshape(wide.shape[0], -1).tobytes()
    stride = wide.shape[1] * 6
    raw = b"".join(b"\x00" + rows[i * stride:(i + 1) * stride] for i in range(wide.shape[0]))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", wide.shape[1], wide.shape[0], 16, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 1))
                     + chunk(b"IEND", b""))


def _rgba(small: Any) -> tuple[Any, Any]:
    """A PNG with a transparent frame (stored black, as editors do) and the picture it shows on white."""
    import numpy as np
    from PIL import Image

    rgba = np.dstack([np.asarray(small), np.full(small.size[::-1], 255, np.uint8)])
    frame = np.zeros(small.size[::-1], bool)
    fy, fx = small.size[1] // 8, small.size[0] // 8
    frame[:fy], frame[-fy:], frame[:, :fx], frame[:, -fx:] = True, True, True, True
    rgba[frame] = (0, 0, 0, 0)
    shown = np.asarray(small).copy()
    shown[frame] = 255
    return Image.fromarray(rgba, "RGBA"), Image.fromarray(shown, "RGB")


def _write_all(out: Path) -> list[Photo]:
    from PIL import Image

    master = make_master()
    gray = master.convert("L")
    photos = [Photo("baseline", "baseline.jpg", "jpeg", "baseline.jpg"),
              Photo("progressive", "progressive.jpg", "jpeg", "progressive.jpg"),
              Photo("greyscale", "greyscale.jpg", "jpeg", "greyscale.jpg"),
              Photo("cmyk", "cmyk.jpg", "jpeg", "cmyk.jpg")]
    _jpeg(master, out / "baseline.jpg")
    _jpeg(master, out / "progressive.jpg", progressive=True)
    _jpeg(gray, out / "greyscale.jpg")
    # 4 channels, not subsampled: 11 MB at 12 MP, over both servers' 6.5 MB request limit; print-sized instead
    _jpeg(master.resize(HALF, Image.Resampling.BOX).convert("CMYK"), out / "cmyk.jpg")
    for orientation, stored in ((3, Image.Transpose.ROTATE_180), (6, Image.Transpose.ROTATE_90),
                                (8, Image.Transpose.ROTATE_270)):  # the tag's transform turns each upright
        _jpeg(master.transpose(stored), out / f"exif{orientation}.jpg", exif=_exif(orientation))
        photos.append(Photo(f"exif{orientation}", f"exif{orientation}.jpg", "jpeg", f"exif{orientation}.jpg"))
    _jpeg(master.transpose(Image.Transpose.ROTATE_90), out / "progressive_exif6.jpg", progressive=True, exif=_exif(6))
    photos.append(Photo("progressive_exif6", "progressive_exif6.jpg", "jpeg", "progressive_exif6.jpg"))
    strip = master.crop((PHONE[0] // 2, 0, PHONE[0] // 2 + 1, PHONE[1]))
    _jpeg(strip, out / "strip.jpg", quality=95, subsampling=0)
    photos.append(Photo("strip_1px", "strip.jpg", "jpeg", "strip.jpg"))
    small = master.resize(SMALL, Image.Resampling.BOX)
    small.save(out / "ref_small.png", compress_level=1)
    _png16(small, out / "rgb16.png")
    rgba, shown = _rgba(small)
    rgba.save(out / "rgba.png", compress_level=1)
    shown.save(out / "ref_rgba.png", compress_level=1)
    photos += [Photo("png_16bit", "rgb16.png", "png", "ref_small.png"),
               Photo("png_rgba", "rgba.png", "png", "ref_rgba.png")]
    if _heic(small, out / "photo.heic"):
        photos.append(Photo("heic", "photo.heic", "heic", "photo.heic"))
    data = (out / "baseline.jpg").read_bytes()
    (out / "truncated.jpg").write_bytes(data[: len(data) * 6 // 10])
    photos.append(Photo("truncated", "truncated.jpg", "jpeg", None, 400))
    return photos


def _heic(im: Any, path: Path) -> bool:
    try:
        import pillow_heif
    except ImportError:
        return False
    buf = io.BytesIO()
    pillow_heif.from_pillow(im).save(buf, quality=90, enc_params={"preset": "ultrafast"})
    path.write_bytes(buf.getvalue())
    return True


def make_corpus(folder: Path) -> list[Photo]:
    """Write the corpus into *folder* (once: a finished one is reused) and list its items."""
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / "corpus.json"
    if index.is_file():
        doc = json.loads(index.read_text())
        if doc.get("version") == CORPUS_VERSION:
            return [Photo(**item) for item in doc["items"]]
    photos = _write_all(folder)
    index.write_text(json.dumps({"version": CORPUS_VERSION, "items": [asdict(p) for p in photos]}, indent=1))
    return photos
