"""mmsctl's built-in MXNet image-classification handler (MMS 1.x handler contract).

Standalone on purpose: it imports only mxnet, numpy and the standard library,
so an archive that carries it as ``mmsctl_vision_service.py`` (handler
``mmsctl_vision_service:handle``) serves the same way in mmsctl and in
Model Server for Apache MXNet 1.1.x.

The model folder holds ``signature.json`` (input name and NCHW shape),
``synset.txt`` (one label per line) and an MXNet checkpoint
``<prefix>-symbol.json`` + ``<prefix>-<epoch>.params``.

Pre- and post-processing are those of MMS's ``mxnet_vision_service`` example:
decode to RGB with ``mx.image.imdecode``, resize to the signature's HxW with
MMS's interpolation 2, HWC->CHW, float32 0..255 without normalisation; the answer
per image is the top 5 ``{"probability": p, "class": label}`` by descending
probability. Unlike the example it batches: every request of a batch goes
through one forward pass, and an image that cannot be decoded fails only its
own request (status 400 with an MMS error body). A request may ask for a
different number of classes with a ``topk`` (or ``top_k``) parameter, e.g.
``POST /predictions/squeezenet?topk=10``, or for every class's score, unranked, as a float32 ``.npy``
vector with ``scores=npy`` (what the v2 API's FP32 output is made of).

Where ``mmsctl`` is importable (predict, mmsctl serve, Lambda) the network is first rewritten by
``mmsctl.engine.graph`` (``relu`` as ``Activation``, zero pads and inference dropouts gone: same outputs,
MKL-DNN runs it whole; ``MMSCTL_GRAPH_REWRITE=0`` turns it off), and images are read by
``mmsctl.engine.imaging`` instead: JPEGs decoded at a reduced DCT scale, EXIF orientation,
CMYK/alpha/16-bit/HEIC, area-averaged to at most HxW (``MMSCTL_IMAGE_DECODER=mxnet`` turns it off).
Inside MMS the path above is used, and before an image is decoded its size is read from its header (PNG, JPEG, BMP and TIFF, what
MXNet's OpenCV decodes): an image of more than ``MMSCTL_MAX_IMAGE_PIXELS`` pixels (default
89478485, PIL's ``MAX_IMAGE_PIXELS``) is refused with a 400 instead of being decoded, so a
small file that decodes to gigabytes (a decompression bomb) never takes the worker's memory.
"""

from __future__ import annotations

import glob
import io
import json
import logging
import os
import re
import struct

# Quieten mxnet's per-bind "Subgraph backend MKLDNN is activated" line.
os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402

try:  # mmsctl's decoder (scaled JPEG decodes, EXIF orientation, HEIC) where mmsctl is installed
    from mmsctl.engine import imaging as _imaging
except ImportError:  # inside MMS 1.1.x: today's mx.image path, as MMS's example reads images
    _imaging = None  # type: ignore[assignment]
try:  # inference-only graph rewrites (MKL-DNN runs ONNX-imported nets whole) where mmsctl is installed
    from mmsctl.engine import graph as _graph
except ImportError:  # inside MMS 1.1.x: the network as it is
    _graph = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DEFAULT_TOP_K = 5
#: OpenCV area interpolation, as in MMS's ``mxnet_utils.image.resize``.
RESIZE_INTERP = 2
_TOPK_KEYS = ("topk", "top_k")
#: The parameter that asks for every class's score as a float32 ``.npy`` vector (``scores=npy``), unranked:
#: what the v2 API's FP32 output is made of, without a 1,000-entry JSON list each way.
SCORES_KEY = "scores"
NPY_TYPE = "application/x-npy"
_INPUT_KEYS = ("body", "data")
#: How often a batch size is padded into a larger bound shape before it gets its own.
_PAD_BEFORE_BIND = 2
#: The most input elements a worker binds (batch x C x H x W; 1 GiB of float32).
MAX_INPUT_ELEMENTS = 2**28
#: PIL's ``Image.MAX_IMAGE_PIXELS``; the server sets the variable from its ``max_image_pixels``.
DEFAULT_MAX_IMAGE_PIXELS = 89478485
_REASONS = {400: "Bad Request", 415: "Unsupported Media Type"}
#: The first bytes of a ``.npy`` array (``numpy.save``).
_NPY_MAGIC = b"\x93NUMPY"
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


class InputError(ValueError):
    """One request's input cannot be used; only that request fails (400, or *status*)."""

    def __init__(self, message, status=400, kind="BadRequestException"):
        super(InputError, self).__init__(message)
        self.status, self.kind = status, kind


def find_checkpoint(model_dir, preferred=None):
    """Return ``(prefix, epoch)`` of the MXNet checkpoint in *model_dir*."""
    symbols = sorted(glob.glob(os.path.join(glob.escape(model_dir), "*-symbol.json")))
    if not symbols:
        raise RuntimeError("no *-symbol.json in " + model_dir)
    prefix = None
    if preferred:
        wanted = os.path.join(model_dir, preferred + "-symbol.json")
        if wanted in symbols:
            prefix = wanted[: -len("-symbol.json")]
    if prefix is None:
        if len(symbols) > 1:
            raise RuntimeError("more than one *-symbol.json in {}: {}".format(model_dir, symbols))
        prefix = symbols[0][: -len("-symbol.json")]
    epochs = []
    pattern = re.compile(re.escape(os.path.basename(prefix)) + r"-(\d+)\.params$")
    for name in os.listdir(model_dir):
        match = pattern.match(name)
        if match:
            epochs.append(int(match.group(1)))
    if not epochs:
        raise RuntimeError("no {}-NNNN.params beside {}-symbol.json".format(prefix, prefix))
    return prefix, max(epochs)


def _mxnet_reason(exc):
    """The last line of an MXNetError without the C++ traceback ("Decoding failed. ...")."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "unknown error"
    return last.split("): ", 1)[-1] if "Check failed" in last else last.replace("MXNetError: ", "")


def _env_int(name, default):
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


def max_image_pixels():
    """The pixel cap: ``MMSCTL_MAX_IMAGE_PIXELS``, else PIL's default."""
    value = os.environ.get("MMSCTL_MAX_IMAGE_PIXELS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_IMAGE_PIXELS


def _jpeg_size(buf):
    pos = 2
    while pos + 4 <= len(buf):
        if buf[pos] != 0xFF:
            return None
        marker = buf[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # no length
            pos += 2
            continue
        (length,) = struct.unpack(">H", buf[pos + 2:pos + 4])
        if marker in _JPEG_SOF and pos + 9 <= len(buf):
            height, width = struct.unpack(">HH", buf[pos + 5:pos + 9])
            return width, height
        pos += 2 + length
    return None


def _tiff_size(buf):
    order = "<" if buf[:2] == b"II" else ">"
    try:
        (offset,) = struct.unpack(order + "I", buf[4:8])
        (count,) = struct.unpack(order + "H", buf[offset:offset + 2])
        size = {}
        for i in range(count):
            entry = buf[offset + 2 + 12 * i:offset + 14 + 12 * i]
            tag, kind = struct.unpack(order + "HH", entry[:4])
            if tag in (256, 257):  # ImageWidth, ImageLength: SHORT or LONG
                fmt = order + ("H" if kind == 3 else "I")
                size[tag] = struct.unpack(fmt, entry[8:8 + struct.calcsize(fmt)])[0]
        return (size[256], size[257]) if len(size) == 2 else None
    except (struct.error, KeyError):
        return None


def image_size(buf):
    """``(width, height)`` from the header of a PNG, JPEG, BMP or TIFF; None for anything else."""
    head = bytes(buf[:32])
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(buf)
    if head.startswith(b"BM") and len(head) >= 26:
        (header_size,) = struct.unpack("<I", head[14:18])
        if header_size == 12:
            return struct.unpack("<HH", head[18:22])
        width, height = struct.unpack("<ii", head[18:26])
        return abs(width), abs(height)
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return _tiff_size(bytes(buf[:1 << 20]))
    return None


def _check_pixels(buf):
    """Refuse an image whose header says it decodes to more than the pixel cap (before decoding it)."""
    size = image_size(buf)
    if size is None:  # not a format the decoder reads: it refuses it without decoding anything
        return
    width, height = size
    limit = max_image_pixels()
    if width * height > limit:
        raise InputError("Image of {}x{} = {} pixels is over the limit of {} pixels "
                         "(max_image_pixels / MMSCTL_MAX_IMAGE_PIXELS)".format(width, height, width * height, limit))


def _manifest_model_name(manifest):
    if not isinstance(manifest, dict):
        return None
    model = manifest.get("model") or manifest.get("Model") or {}
    return model.get("modelName") or model.get("Name")


def _scores_wanted(request):
    """A ``scores=npy`` parameter: the answer is every class's score as a ``.npy`` vector, unranked."""
    value = request.get(SCORES_KEY)
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    return isinstance(value, str) and value.strip() == "npy"


def _top_k(request):
    for key in _TOPK_KEYS:
        if key in request:
            value = request[key]
            if isinstance(value, (bytes, bytearray)):
                value = value.decode("utf-8", "replace")
            try:
                k = int(str(value).strip())
            except ValueError:
                raise InputError("{} must be a whole number, not {!r}".format(key, value)) from None
            if k < 1:
                raise InputError("{} must be 1 or more, not {}".format(key, k))
            return k
    return DEFAULT_TOP_K


class VisionService(object):
    """Loads the checkpoint once; classifies a batch of images per call."""

    def __init__(self):
        self.initialized = False
        self.labels = None
        self.signature = None
        self._modules = {}
        self._misses = {}
        self._main = None

    def initialize(self, context):
        props = context.system_properties
        model_dir = props.get("model_dir")
        gpu_id = props.get("gpu_id")
        self.batch_size = int(props.get("batch_size") or 1)
        with open(os.path.join(model_dir, "signature.json")) as fh:
            self.signature = json.load(fh)
        first = self.signature["inputs"][0]
        self.data_name = first["data_name"]
        shape = list(first["data_shape"])
        if len(shape) != 4:
            raise RuntimeError("expected an NCHW data_shape in signature.json, got {}".format(shape))
        self.channels, self.height, self.width = (int(v) or 1 for v in shape[1:])
        elements = self.batch_size * self.channels * self.height * self.width
        if min(self.channels, self.height, self.width) < 0 or elements > MAX_INPUT_ELEMENTS:
            # the signature is the archive's: binding it would allocate whatever it asks for
            raise RuntimeError("signature.json's input {} x {} is more than the {} elements a worker binds".format(
                self.batch_size, shape[1:], MAX_INPUT_ELEMENTS))
        synset = os.path.join(model_dir, "synset.txt")
        if os.path.isfile(synset):
            with open(synset) as fh:
                self.labels = [line.strip() for line in fh]
        prefix, epoch = find_checkpoint(model_dir, _manifest_model_name(context.manifest))
        self.ctx = mx.gpu(int(gpu_id)) if gpu_id is not None else mx.cpu()
        self._sym, args, aux = mx.model.load_checkpoint(prefix, epoch)
        if _graph is not None:  # mmsctl's kernel choice was measured on this same rewritten graph
            text, changes = _graph.normalise(self._sym.tojson())
            if changes:
                self._sym = mx.sym.load_json(text)
                log.info("network rewritten for inference: %s", ", ".join(changes))
        # The executors use the loaded arrays themselves: one copy of the weights in memory, shared
        # by every batch size (an mx.mod.Module keeps two more: its own and the one it loads from).
        self._args = {name: arr.as_in_context(self.ctx) for name, arr in args.items()}
        self._aux = {name: arr.as_in_context(self.ctx) for name, arr in aux.items()}
        del args, aux
        # Bind the largest batch first: smaller ones share its memory without re-allocating.
        self._module(self.batch_size)
        self.initialized = True

    def _module(self, n):
        """An executor bound for batches of exactly *n*, on the shared weights.

        Arguments the checkpoint lacks (a softmax label, say) are zeros, as Module's
        ``set_params(allow_missing=True)`` leaves them; extra ones are ignored.
        """
        executor = self._modules.get(n)
        if executor is None:
            sym = self._sym
            shape = (n, self.channels, self.height, self.width)
            arg_shapes, _, aux_shapes = sym.infer_shape(**{self.data_name: shape})
            args = {name: self._args[name] if name in self._args and name != self.data_name
                    else mx.nd.zeros(arg_shape, ctx=self.ctx)
                    for name, arg_shape in zip(sym.list_arguments(), arg_shapes)}
            aux = {name: self._aux[name] if name in self._aux else mx.nd.zeros(aux_shape, ctx=self.ctx)
                   for name, aux_shape in zip(sym.list_auxiliary_states(), aux_shapes)}
            executor = sym.bind(self.ctx, args, grad_req="null", aux_states=aux, shared_exec=self._main)
            if self._main is None:
                self._main = executor
            self._modules[n] = executor
        return executor

    def _bound_size(self, n):
        """The batch size to run *n* images at (the rest of the batch is padding).

        A new input shape costs a bind plus a first forward (MKL-DNN sets up its kernels),
        more than the forward itself. So a size seen only now and
        then (the last, partial batch of a folder; a rare size under dynamic batching) runs
        padded in a larger shape that is already bound (at most 4x its size); a size that
        keeps coming back gets its own shape, so padding never costs compute for long.
        """
        if n in self._modules:
            return n
        seen = self._misses.get(n, 0) + 1
        self._misses[n] = seen
        larger = [m for m in self._modules if n < m <= 4 * n]
        if larger and seen <= _PAD_BEFORE_BIND:
            return min(larger)
        return n

    def decode(self, request):
        """One request's image as an HxWxC uint8 numpy array."""
        buf = None
        for key in (self.data_name,) + _INPUT_KEYS:
            if request.get(key) is not None:
                buf = request[key]
                break
        if buf is None or len(buf) == 0:
            raise InputError("Empty image input")
        if isinstance(buf, str):
            buf = buf.encode("latin-1", "replace")
        if isinstance(buf, (dict, list)):
            raise InputError("Expected an image, got a JSON body")
        if bytes(buf[:6]) == _NPY_MAGIC:  # a tensor (the v2 API's FP32 input), not an encoded image
            return self._decode_tensor(bytes(buf))
        if _imaging is not None and os.environ.get("MMSCTL_IMAGE_DECODER", "").strip() != "mxnet":
            return self._decode_scaled(bytes(buf))
        _check_pixels(buf)
        try:
            img = mx.image.imdecode(bytes(buf), flag=1 if self.channels == 3 else 0, to_rgb=True)
            img = mx.image.imresize(img, self.width, self.height, RESIZE_INTERP)
            return img.asnumpy()
        except mx.base.MXNetError as exc:
            raise InputError("Corrupted image input: " + _mxnet_reason(exc)) from None

    def _decode_tensor(self, buf):
        """An ``.npy`` HxWxC numeric array, its header checked against the signature before any data is read."""
        fh = io.BytesIO(buf)
        want = (self.height, self.width, self.channels)
        try:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(fh)
        except (ValueError, SyntaxError, TypeError) as exc:
            raise InputError("Invalid tensor input: {}".format(exc)) from None
        if tuple(shape) != want or fortran or dtype.hasobject or dtype.kind not in "fiu":
            raise InputError("Expected a numeric tensor of shape {} (HxWxC), got {} {}".format(want, dtype, shape))
        data = buf[fh.tell():]
        if len(data) != dtype.itemsize * self.height * self.width * self.channels:
            raise InputError("Tensor input holds {} bytes, not the {} its header says".format(
                len(data), dtype.itemsize * self.height * self.width * self.channels))
        return np.frombuffer(data, dtype=dtype).reshape(want).astype(np.float32)

    def _decode_scaled(self, buf):
        """mmsctl's decoder (smallest JPEG scale at or above HxW, upright, RGB), then today's resize."""
        try:
            img = _imaging.decode(buf, self.width, self.height, gray=self.channels != 3, max_pixels=max_image_pixels(),
                                  oversample=_env_int("MMSCTL_IMAGE_OVERSAMPLE", _imaging.OVERSAMPLE)).pixels
        except _imaging.ImageError as exc:
            raise InputError(str(exc), exc.status, exc.type) from None
        if img.shape[:2] == (self.height, self.width):
            return img
        return mx.image.imresize(mx.nd.array(img, dtype=np.uint8), self.width, self.height, RESIZE_INTERP).asnumpy()

    def forward(self, images):
        """Run the network on a list of HxWxC arrays; returns an (n, classes) float32 array."""
        n = len(images)
        size = self._bound_size(n)
        batch = np.zeros((size, self.channels, self.height, self.width), dtype=np.float32)
        for i, img in enumerate(images):
            batch[i] = img.reshape(self.height, self.width, -1).transpose(2, 0, 1)
        executor = self._module(size)
        executor.arg_dict[self.data_name][:] = batch
        out = executor.forward(is_train=False)[0].asnumpy()
        return out.reshape(size, -1)[:n]  # (n, classes, 1, 1) -> (n, classes), like MMS's squeeze

    def postprocess(self, scores, top_k):
        order = np.argsort(-scores, kind="stable")[:top_k]
        labels = self.labels
        return [
            {
                "probability": float(scores[i]),
                "class": labels[i] if labels is not None and i < len(labels) else str(int(i)),
            }
            for i in order
        ]

    def handle(self, data, context):
        results: list[object] = [None] * len(data)
        images, positions, top_ks = [], [], []
        types = ["application/json"] * len(data)
        for idx, request in enumerate(data):
            try:
                if not isinstance(request, dict):
                    raise InputError("Expected a request parameter map")
                top_ks.append(None if _scores_wanted(request) else _top_k(request))
                images.append(self.decode(request))
                positions.append(idx)
            except InputError as exc:
                if len(top_ks) > len(images):
                    top_ks.pop()
                results[idx] = {"code": exc.status, "type": exc.kind, "message": str(exc)}
                context.set_response_status(exc.status, _REASONS.get(exc.status, "Bad Request"), idx)
        if images:
            scores = self.forward(images)
            for row, idx, k in zip(scores, positions, top_ks):
                if k is None:  # every class's score, as a float32 .npy vector (the v2 API's FP32 output)
                    out = io.BytesIO()
                    np.save(out, np.ascontiguousarray(row, dtype=np.float32), allow_pickle=False)
                    results[idx], types[idx] = out.getvalue(), NPY_TYPE
                else:
                    results[idx] = self.postprocess(row, k)
        for idx in range(len(data)):
            context.set_response_content_type(idx, types[idx])
        return results


_service = VisionService()


def handle(data, context):
    """MMS entry point: initialise on the load-time call (``data is None``), then classify."""
    if not _service.initialized:
        _service.initialize(context)
    if data is None:
        return None
    return _service.handle(data, context)
