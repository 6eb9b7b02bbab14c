"""Reading the images people send: phone JPEGs, HEIC, EXIF rotation, odd modes — small, upright, RGB.

A 12-megapixel JPEG decoded at full size costs several times the network's forward pass for a
224x224 model; libjpeg can instead decode straight to 1/2, 1/4 or 1/8 scale in the DCT domain
(Pillow's ``draft``). So :func:`decode` reads each image at the smallest scale still at least
``OVERSAMPLE`` times what the model needs, turns it upright (EXIF ``Orientation``), converts
greyscale, CMYK, palette, alpha (composited on white) and 16-bit images to RGB (or L), and
averages it down (area) to at most the model's size. What is left to enlarge is left to the
model's own resize (the built-in handler's is MMS's), so it gives the model
exactly the numbers a full decode would. HEIC/HEIF goes through ``pillow-heif``, imported only when
the bytes are HEIF. Pillow, not simplejpeg (no CMYK or EXIF) or PyTurboJPEG (a system
libturbojpeg, not on PyPI): docs/predict.md.

The pixel cap applies to the decoded size: a JPEG scaled by 1/4 on decode allocates 1/16 of its
stored pixels, so a big photo that a full decode would refuse is read (its entropy-coded data
still bounds the work); PNG, HEIC and other formats decode at full size and are capped at it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # numpy and PIL load with the first image, not with the package
    import numpy as np
    from PIL import Image

__all__ = ["Decoded", "ImageError", "MissingPlugin", "decode", "header_size", "is_heif"]

#: The package that reads HEIC/HEIF, named in the error when it is missing.
HEIF_PACKAGE = "pillow-heif"
_HEIF_BRANDS = (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1", b"avif")
_ORIENTATION = 0x0112
_TRANSPOSED = frozenset((5, 6, 7, 8))  # orientations that swap width and height
#: Decode JPEGs to at least this many times the model's input, then average down (area): at 1x the chroma
#: of a 4:2:0 JPEG is coarser than the model's input and the top-5 drifts from a full decode's; at 2x it
#: stays close (docs/performance.md). MMSCTL_IMAGE_OVERSAMPLE in the handler.
OVERSAMPLE = 2
_heif_ready = False


class ImageError(ValueError):
    """One image cannot be used; *status* and *type* are its MMS error body's."""

    status = 400
    type = "BadRequestException"


class MissingPlugin(ImageError):
    """The bytes are a format that needs a package that is not installed."""

    status = 415
    type = "UnsupportedMediaTypeException"


@dataclass(frozen=True)
class Decoded:
    """What :func:`decode` read: the pixels and how (for logs and benchmarks)."""

    pixels: "np.ndarray"  #: HxWxC uint8, C = 3 (RGB) or 1 (L); no larger than the model's HxW
    stored: tuple[int, int]  #: (width, height) in the file
    scale: int  #: 1, 2, 4 or 8: the DCT scaling libjpeg decoded at
    orientation: int  #: the EXIF Orientation applied (1 = none)


def is_heif(data: bytes) -> bool:
    """True for an ISO-BMFF ``ftyp`` box with a HEIF/AVIF brand."""
    return len(data) >= 12 and data[4:8] == b"ftyp" and data[8:12] in _HEIF_BRANDS


def _register_heif() -> None:
    """Register pillow-heif's opener with Pillow, on the first HEIF image only."""
    global _heif_ready
    if _heif_ready:
        return
    try:
        import pillow_heif
    except ImportError:
        raise MissingPlugin(f"HEIC/HEIF images need the {HEIF_PACKAGE} package (pip install {HEIF_PACKAGE})") from None
    pillow_heif.register_heif_opener()
    _heif_ready = True


def _corrupt(exc: BaseException) -> "ImageError":
    """The answer for data Pillow cannot decode, in our words (Pillow's messages name its own internals)."""
    what = "is truncated" if "truncated" in str(exc) else "is corrupt or not an image Pillow can decode"
    return ImageError(f"Corrupted image input: the image data {what}.")


def _open(data: bytes) -> "Image.Image":
    """Open the header only; the decoder's own cap replaces PIL's (which knows nothing of scaled decodes)."""
    from PIL import Image, UnidentifiedImageError

    if is_heif(data):
        _register_heif()
    Image.MAX_IMAGE_PIXELS = None  # checked by decode() on the size it will actually allocate
    try:
        return Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise ImageError("Corrupted image input: Decoding failed. Invalid image file.") from None  # as MXNet says it
    except (OSError, ValueError, SyntaxError) as exc:
        raise _corrupt(exc) from None


def header_size(data: bytes) -> Optional[tuple[int, int]]:
    """``(width, height)`` as stored, from the header (nothing decoded); None if not an image."""
    try:
        with _open(data) as im:
            return im.size
    except MissingPlugin:
        raise
    except ImageError:
        return None


def _orientation(im: "Image.Image") -> int:
    try:
        value = im.getexif().get(_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block must not fail an otherwise good image
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _draft(im: "Image.Image", width: int, height: int, gray: bool, orientation: int, oversample: int) -> int:
    """Ask libjpeg for the smallest DCT scale at or above *oversample* x (width, height); the scale it took."""
    if im.format != "JPEG":
        return 1
    if orientation in _TRANSPOSED:
        width, height = height, width
    stored = im.size[0]
    drafted = im.draft("L" if gray else "RGB", (max(1, width * oversample), max(1, height * oversample)))
    return max(1, round(stored / drafted[1][2])) if drafted and drafted[1][2] else 1


def _upright(im: "Image.Image", orientation: int) -> "Image.Image":
    from PIL import Image

    method = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
              4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
              6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
              8: Image.Transpose.ROTATE_90}.get(orientation)
    return im.transpose(method) if method is not None else im


def _to_mode(im: "Image.Image", mode: str) -> "Image.Image":
    """RGB or L from whatever the file holds: alpha on white, 16-bit to 8, CMYK and palettes converted."""
    import numpy as np
    from PIL import Image

    if im.mode == mode:
        return im
    if im.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        wide = np.asarray(im, dtype=np.float64)
        top = 65535.0 if im.mode != "F" or wide.max() > 1.0 else 1.0
        im = Image.fromarray(np.clip(np.rint(wide * (255.0 / top)), 0, 255).astype(np.uint8), "L")
    if (im.mode == "P" and "transparency" in im.info) or im.mode in ("PA", "LA", "La", "RGBa"):
        im = im.convert("RGBA")
    if im.mode == "RGBA":
        white = Image.new("RGBA", im.size, (255, 255, 255, 255))
        im = Image.alpha_composite(white, im)
    return im.convert(mode)


def _shrink(im: "Image.Image", width: int, height: int) -> "Image.Image":
    """Average (area) down to at most *width* x *height*; a side already shorter is left for the
    caller's own resize (the built-in handler's is MMS's)."""
    from PIL import Image

    shrunk = (min(im.width, width), min(im.height, height))
    return im.resize(shrunk, Image.Resampling.BOX) if shrunk != im.size else im


def decode(data: bytes, width: int, height: int, *, gray: bool = False, max_pixels: int,
           oversample: int = OVERSAMPLE) -> Decoded:
    """Decode *data* upright, RGB or L, averaged down (area) to at most *width* x *height*.

    A side shorter than the model's comes back as it is, for the caller's own resize (the built-in
    handler's is MMS's: an image that needs no shrinking gives the model exactly the numbers it did).
    *oversample* 1 trades fidelity for speed (a smaller decode scale).

    Raises:
        ImageError: not an image, truncated or corrupt, or more than *max_pixels* once decoded.
        MissingPlugin: HEIC/HEIF without pillow-heif installed.
    """
    import numpy as np

    im = _open(data)
    with im:
        stored = im.size
        orientation = _orientation(im)
        scale = _draft(im, width, height, gray, orientation, max(1, oversample))
        w, h = im.size
        if w * h > max_pixels:
            raise ImageError(f"Image of {w}x{h} = {w * h} pixels is over the limit of {max_pixels} pixels "
                             "(max_image_pixels / MMSCTL_MAX_IMAGE_PIXELS)")
        mode = "L" if gray else "RGB"
        try:
            im.load()
            upright = _upright(im, orientation)  # first: the box filter's windows start at the top left
            if upright.mode == "L" and mode == "RGB":  # widening grey commutes with averaging: on 224x224
                out = _to_mode(_shrink(upright, width, height), mode)
            else:  # RGB as it is; CMYK, alpha, 16-bit, palettes converted at the decoded size, then averaged
                out = _shrink(_to_mode(upright, mode), width, height)
        except (OSError, ValueError, SyntaxError) as exc:  # truncated or corrupt data
            raise _corrupt(exc) from None
    pixels = np.asarray(out, dtype=np.uint8)
    return Decoded(pixels.reshape(pixels.shape[0], pixels.shape[1], -1), stored, scale, orientation)
