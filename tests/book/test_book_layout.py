"""book/hymo_book is organised by role and each part stays a size a reader can take in: every
package's docstring lists its modules, no module is much over 400 lines and no function over
60, no module imports another's private name, and the library never imports the book."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import hymo_book
import pytest

BOOK_HELPERS = Path(hymo_book.__file__).resolve().parent
MODULES = sorted(BOOK_HELPERS.rglob("*.py"))
# packages whose docstring is their map (the exercises are found by name, one a chapter)
MAPPED = ("", "kernels", "plots", "claims", "site")
TABLE_ENTRY = re.compile(r"^\s+(\w+\.py|\w[\w-]*/)\s{2,}\S", re.MULTILINE)
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def listed(package: Path) -> set[str]:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()), clean=False)
    return set(TABLE_ENTRY.findall(doc or ""))


def children(package: Path) -> set[str]:
    files = {p.name for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    return files | {p.name + "/" for p in package.iterdir()
                    if p.is_dir() and not p.name.startswith(("_", "."))}


@pytest.mark.parametrize("name", MAPPED)
def test_every_package_lists_its_modules(name):
    package = BOOK_HELPERS / name
    missing, stale = children(package) - listed(package), listed(package) - children(package)
    assert not missing and not stale, f"not listed: {sorted(missing)}; no such: {sorted(stale)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(BOOK_HELPERS)))
def test_modules_and_functions_stay_short(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{path.name}: split it by topic"
    long = [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{path.name}: {long}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(BOOK_HELPERS)))
def test_no_private_name_is_imported_from_another_module(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hymo_book"):
            private = [a.name for a in node.names if a.name.startswith("_")]
            assert not private, f"{path.name} imports {private} from {node.module}"
