"""HTTP/1.1 on the wire, for both ends of a connection: the one place httptools (llhttp, C) is driven.

* :mod:`~mmsctl.http1.requests`: a connection's requests as they arrive (the server's lean path; the
  aiohttp path's splitter, :mod:`~mmsctl.http1.splitter`): the request line a server routes by, then each
  request's head and body, exactly to its last byte, so that what follows is the next request's, untouched;
* :mod:`~mmsctl.http1.responses`: answers written whole (status line, headers, ``Date``, ``Content-Length``);
* :mod:`~mmsctl.http1.answers`: answers read back, one at a time within a ceiling of bytes (``predict``'s warm
  path, ``mmsctl bench``'s load generator).

Like h11, one sans-I/O core for clients and servers alike: bytes in, callbacks out; sockets, event loops
and what a request means are the caller's. Stdlib and httptools only (the lean ``predict`` imports it:
no ``dataclasses``, see tests/cli/test_lazy_imports.py).
"""
