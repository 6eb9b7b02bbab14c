"""mmsctl: a terminal-first tool for serving MXNet models.

The package root stays import-light on purpose: ``mmsctl --help`` must not pull
in mxnet, numpy, textual or boto3. Heavy parts live in their own sub-packages
(``archive``, ``engine``, ``zoo``, ``server``, ``client``, ``cloud``, ``tui``)
and are imported only by the commands that need them.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
