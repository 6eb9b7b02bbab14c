"""The Open Inference Protocol (KServe v2) on the inference port: its routes (``api.py``), the steps from a
request's body to its answer (``infer.py``, over the tensors of ``models.py``), the call both HTTP paths make of
an infer request, with its remembered recipes (``calls.py``), and its ``{"error": ...}`` answers (``errors.py``).
"""
