"""Which model ``mmsctl predict`` runs and how: name or path → a :class:`ServiceSpec`, then a service.

Resolving names (the zoo) and opening archives happens here, above the engine:
the engine only ever sees a :class:`~mmsctl.engine.spec.ServiceSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from mmsctl.engine.spec import ServiceSpec
from mmsctl.predict.local import PredictService

__all__ = ["AUTO_BATCH", "StartedService", "default_batch_size", "open_model", "start_service"]


@dataclass(frozen=True)
class StartedService:
    """What :func:`start_service` started, and the batch size to feed it (``predict_local``'s ``batch_size``)."""

    service: PredictService
    batch_size: int


def _is_checkpoint_folder(path: Path) -> bool:
    return (
        path.is_dir()
        and not (path / "MAR-INF" / "MANIFEST.json").is_file()
        and not (path / "MANIFEST.json").is_file()
        and (path / "signature.json").is_file()
        and any(path.glob("*-symbol.json"))
    )


def open_model(location: str, *, progress: bool = True) -> ServiceSpec:
    """Find a model by zoo name, path, URL or ``name=location`` and open it.

    A word is a zoo name, a path has a slash (``./squeezenet``): :func:`mmsctl.names.model_location`.

    A bare MXNet checkpoint folder (``signature.json``, ``*-symbol.json``,
    ``*.params``, ``synset.txt``, no manifest) is served with the built-in vision
    handler as it is.

    Returns:
        What :func:`start_service` loads.

    Raises:
        ModelNotFoundError: nothing by that name or path.
        ArchiveError: the archive cannot be read.
    """
    from mmsctl.names import model_location

    where = model_location(location)
    name_override, target = where.name, where.value
    path = Path(target).expanduser()
    if where.kind == "path" and _is_checkpoint_folder(path):
        return ServiceSpec(path.resolve(), name_override or path.name.split("-")[0])
    from mmsctl.archive import open_archive
    from mmsctl.zoo import resolve_model

    resolved = resolve_model(target, progress=progress)
    path = Path(resolved.path)
    if _is_checkpoint_folder(path):
        return ServiceSpec(path.resolve(), name_override or resolved.name)
    archive = open_archive(path)
    return archive.service_spec(name=name_override or archive.model_name or resolved.name)


#: Inputs per forward pass for the built-in image handler (others get 1, as MMS's examples need).
AUTO_BATCH = 16


def default_batch_size(model: ServiceSpec, handler: Optional[str] = None) -> int:
    """The batch size `predict` uses when none is given."""
    from mmsctl.engine.builtin import VISION_HANDLER_MODULE
    from mmsctl.engine.loader import split_handler

    chosen = handler or model.handler
    if chosen is None or split_handler(chosen)[0] == VISION_HANDLER_MODULE:
        return AUTO_BATCH
    return 1


def start_service(
    model: ServiceSpec,
    inputs: int,
    *,
    batch_size: Optional[int] = None,
    handler: Optional[str] = None,
    gpu: Optional[int] = None,
    workers: Optional[int] = None,
) -> StartedService:
    """Start what runs *model* for *inputs* inputs: this process, or a pool of one per core.

    Raises:
        EngineError: the model cannot load, e.g. its network is over ``MMSCTL_MAX_MODEL_MEMORY``.
    """
    from mmsctl.predict.pool import choose_workers

    size = max(1, min(batch_size or default_batch_size(model, handler), inputs))
    processes = choose_workers(workers, inputs, size, gpu=gpu)
    if batch_size is None and size > 1 and gpu is None:
        size = max(1, min(_measured_batch(model, processes), inputs))
    spec = replace(model, batch_size=size, handler_override=handler, gpu_id=gpu)
    if processes > 1:
        from mmsctl.predict.pool import ServicePool

        return StartedService(ServicePool(spec, workers=processes), size)
    from mmsctl.engine.kernels import apply_in_process
    from mmsctl.engine.service import load_service

    apply_in_process(Path(spec.root), gpu=gpu, model=spec.model_name, handler=spec.chosen_handler)
    return StartedService(load_service(spec), size)


def _measured_batch(model: ServiceSpec, processes: int) -> int:
    """The batch size that costs least per image for this model on this machine (measured with the
    kernel choice, :mod:`mmsctl.engine.kernels`); :data:`AUTO_BATCH` where nothing was measured."""
    import os

    from mmsctl.engine.kernels import choose_kernels

    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = 1 if processes > 1 else (int(omp) if omp.isdigit() and int(omp) > 0 else (os.cpu_count() or 1))
    choice = choose_kernels(Path(model.root), threads=threads, handler=model.chosen_handler)
    return choice.batch if choice.on_ms is not None or choice.off_ms is not None else AUTO_BATCH
