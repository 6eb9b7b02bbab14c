"""The model a Lambda container serves: loaded once, through mmsctl's own predict core.

Baked into the image (``/opt/mmsctl/model``, an extracted archive or checkpoint
folder) it opens in place. From S3 (``s3://bucket/key``, optionally a pinned
version) the archive is downloaded into the writable ``/tmp`` and extracted there.
Either way it becomes a :class:`~mmsctl.engine.spec.ServiceSpec` (:func:`mmsctl.predict.open_model`,
or :meth:`~mmsctl.archive.ModelArchive.service_spec` for the download) and is started in this
process by :func:`mmsctl.engine.service.load_service` with a batch of one (an execution
environment serves one invocation at a time: no worker pool). Every input goes through
:func:`mmsctl.predict.predict_local`, exactly as ``mmsctl predict`` does, so the same
archive and image give the same answer.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from mmsctl.cloud.lambda_.env import parse_s3_uri
from mmsctl.errors import ArchiveError, CloudError
from mmsctl.lambda_.settings import HandlerSettings

if TYPE_CHECKING:
    from mmsctl.predict import Prediction

__all__ = ["MAX_MODEL_BYTES", "ServedModel", "download_model", "load_model"]

log = logging.getLogger("mmsctl.lambda")

#: The largest archive a container downloads (Lambda's /tmp holds at most 10 GB).
MAX_MODEL_BYTES = 4 * 1024**3
_CHUNK = 1024 * 1024


@dataclass
class ServedModel:
    """A started model and where it came from."""

    name: str
    source: str
    service: Any
    load_ms: float

    def predict(self, name: str, data: bytes, *, top_k: Optional[int] = None) -> "Prediction":
        """One input through the predict core: a :class:`~mmsctl.predict.Prediction`.

        *name* is the input's name (an S3 key, a URL): its suffix gives the content type, as
        for a file given to ``mmsctl predict``.
        """
        from mmsctl.predict import InputSource, predict_local

        source = InputSource(name, "file", name)
        return next(predict_local(self.service, [source], batch_size=1, top_k=top_k, read=lambda _s: data))

    def close(self) -> None:
        self.service.close()


def download_model(s3: Any, uri: str, version_id: Optional[str], work_dir: Path) -> Path:
    """Download the archive at *uri* (that version, if given) into *work_dir*; its path.

    Raises:
        CloudError: S3 refused (no such object, access denied) or the archive is too large.
    """
    from mmsctl.cloud.aws.session import translate_error

    where = parse_s3_uri(uri, version_id)
    params: dict[str, Any] = {"Bucket": where.bucket, "Key": where.key}
    if where.version_id:
        params["VersionId"] = where.version_id
    target_dir = work_dir / "download"
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / Path(where.key).name
    try:
        answer = s3.get_object(**params)
        size = int(answer.get("ContentLength") or 0)
        free = shutil.disk_usage(target_dir).free
        if size > MAX_MODEL_BYTES or size > free:
            raise CloudError(f"{where}: {size} bytes does not fit (limit {min(MAX_MODEL_BYTES, free)} bytes)",
                             hint="raise the function's ephemeral storage, or bake the model into the image")
        written = 0
        with open(target, "wb") as fh:
            for chunk in answer["Body"].iter_chunks(_CHUNK):
                written += len(chunk)
                if written > size:  # the body is longer than S3 said: stop, do not fill /tmp
                    raise CloudError(f"{where}: the body is longer than its Content-Length")
                fh.write(chunk)
    except CloudError:
        raise
    except Exception as exc:  # noqa: BLE001 - botocore errors are translated, the rest pass
        mapped = translate_error(exc, service="s3", operation="get_object")
        if mapped is None:
            raise
        raise CloudError(f"cannot download the model {where}: {mapped.message}", hint=mapped.hint) from exc
    return target


def _remembered_kernels(root: Path, model: str, handler: Optional[str] = None) -> None:
    """Run with the kernel set (MKL-DNN on or off) remembered for this model on this machine, as ``predict``
    and ``serve`` do (the faster set depends on the network and the CPU: :mod:`mmsctl.engine.kernels`).

    Never measured here (a cold start must not spend seconds on it): where nothing is remembered (a
    fresh Lambda container) MXNet's default stays. Only before mxnet is imported: it reads the choice once.
    """
    import os
    import sys

    from mmsctl.engine.kernels import choose_kernels

    if "mxnet" in sys.modules:
        return
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(omp) if omp.isdigit() and int(omp) > 0 else (os.cpu_count() or 1)
    choice = choose_kernels(root, threads=threads, measure_missing=False, handler=handler)
    if choice.mkldnn is not None:
        log.info("model %s runs with %s: %s", model, choice.label, choice.reason)
    os.environ.update(choice.env())


def load_model(settings: HandlerSettings, *, s3: Optional[Callable[[], Any]] = None) -> ServedModel:
    """Open and start the model *settings* names; one call per container.

    Args:
        settings: from :meth:`HandlerSettings.from_environ`.
        s3: makes the S3 client (only called for a model in S3).

    Raises:
        CloudError, ArchiveError, HandlerError, ModelNotFoundError: the container cannot serve.
    """
    from mmsctl.engine.service import load_service
    from mmsctl.predict import open_model

    start = time.perf_counter()
    if settings.model_from_s3:
        if s3 is None:
            raise CloudError(f"the model is in S3 ({settings.model}) but no S3 client was given")
        from mmsctl.archive import open_archive

        work = Path(settings.work_dir)
        path = download_model(s3(), settings.model, settings.model_version, work)
        extracted = work / "model"
        if extracted.exists():  # a previous container's copy (a new one starts clean, but be safe)
            shutil.rmtree(extracted)
        try:
            archive = open_archive(path, workdir=extracted)
        except ArchiveError as exc:
            raise ArchiveError(f"{settings.model}: {exc.message}", hint=exc.hint) from exc
        path.unlink()  # the extracted copy is what runs; free /tmp
        spec = archive.service_spec(batch_size=1)
        source = settings.model + (f" (version {settings.model_version})" if settings.model_version else "")
    else:
        spec = replace(open_model(settings.model, progress=False), batch_size=1)
        source = settings.model
    _remembered_kernels(Path(spec.root), spec.model_name, spec.chosen_handler)
    service = load_service(spec)
    load_ms = (time.perf_counter() - start) * 1000
    log.info("model %s loaded from %s in %.0f ms", spec.model_name, source, load_ms)
    return ServedModel(spec.model_name, source, service, load_ms)
