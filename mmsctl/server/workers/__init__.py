"""Models, their queues and their workers, and what is done with them: ``manager.py`` (the one face the HTTP
side and the lifecycle use), ``registry.py`` (the models by name, ``state.json``), ``supervision.py`` (each
worker's life, back-off), ``scaling.py`` (worker ranges within ``worker_limit``, autoscaling), ``kernels.py``
(the kernel set measured in the background), ``drain.py``, ``model.py`` (a model, its queue and its workers) and
``batching.py``. Nothing here knows of HTTP.
"""
