"""The server's HTTP paths and their one set of rules.

The inference, management and metrics APIs as aiohttp applications (``frontend.py``, ``inference_api.py``,
``invocations.py``, ``management_api.py``, ``middleware.py``, ``connections.py``), the inference API's lean path
(``lean/``), and what both paths share: admission (``admission.py``), what a request means as a call for the
model's queue and its reply (``calls.py``, ``replies.py``, ``bodies.py``, ``params.py``).
"""
