"""Small pieces (issue 11): no function or method under ``mmsctl/`` has a body over 60 lines.

The body runs from the first statement after the docstring to the function's end, read
with ``ast``; ``scripts/sizes.py`` counts the same way (this test uses its counter) and
lists the largest. A function that grows past the limit is split along its seams.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sizes.py"


def _sizes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mmsctl_sizes_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


sizes = _sizes()


def test_no_function_body_is_longer_than_the_limit() -> None:
    found = list(sizes.functions())
    assert len(found) > 1000  # the walk reached the package (methods and nested functions included)
    offenders = [f"{f.where}:{f.line} {f.qualname}: {f.body_lines} body lines"
                 for f in found if f.body_lines > sizes.MAX_BODY_LINES]
    assert not offenders, (f"function bodies over {sizes.MAX_BODY_LINES} lines (split them along their seams):\n  "
                           + "\n  ".join(offenders))


def _body_lines(source: str) -> int:
    node = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return int(sizes.body_lines(node))


def test_the_body_leaves_out_signature_decorators_and_docstring_only() -> None:
    assert _body_lines('''
        @decorated
        def f(
            a: int,
        ) -> int:
            """A docstring
            of two lines."""
            # a comment before the first statement is not counted
            x = a

            return x
        ''') == 3
    assert _body_lines("def f():\n    '''Only a docstring.'''\n") == 0
    assert _body_lines("async def f():\n    'not a docstring' + 'but an expression'\n    return 1\n") == 2


def test_a_body_one_line_over_the_limit_is_named_with_its_length(tmp_path: Path) -> None:
    package = tmp_path / "mmsctl"
    package.mkdir()
    lines = "\n".join(f"        x{i} = {i}" for i in range(sizes.MAX_BODY_LINES + 1))
    (package / "big.py").write_text(f'class K:\n    def m(self):\n        """Why."""\n{lines}\n'
                                    f'    def ok(self):\n        return 1\n', encoding="utf-8")
    measured = {f.qualname: (f.where, f.body_lines) for f in sizes.functions(package)}
    assert measured == {"K.m": ("mmsctl/big.py", sizes.MAX_BODY_LINES + 1), "K.ok": ("mmsctl/big.py", 1)}
