#!/usr/bin/env python3
"""Writes a Jupyter notebook (.ipynb, format 4) beside each examples/notebooks/0*.py script: the
script's docstring as the first (markdown) cell, then one code cell per top-level block (blocks are
separated by blank lines before an unindented line). The scripts are the source; the notebooks are
made from them (python/tests/test_notebooks.py checks they are in sync). Open them with Debian's
jupyter-notebook from examples/notebooks/, with vit importable (pip install ., or PYTHONPATH).

    python3 tools/generate/make_notebooks.py            # writes examples/notebooks/0*.ipynb
"""
import ast
import glob
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDER = os.path.join(ROOT, "examples", "notebooks")


def cells_of(source):
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    lines = source.split("\n")
    body_start = tree.body[1].lineno - 1 if doc and len(tree.body) > 1 else 0
    # a leading comment block belongs to the statement after it
    while body_start > 0 and lines[body_start - 1].startswith("#"):
        body_start -= 1
    blocks, current = [], []
    for i, line in enumerate(lines[body_start:]):
        previous_blank = not current or current[-1].strip() == ""
        if line and not line[0].isspace() and previous_blank and any(c.strip() for c in current):
            blocks.append(current)
            current = []
        current.append(line)
    blocks.append(current)
    cells = [{"cell_type": "markdown", "metadata": {}, "source": _lines(doc)}] if doc else []
    for block in blocks:
        text = "\n".join(block).strip("\n")
        if text:
            cells.append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                          "source": _lines(text)})
    return cells


def _lines(text):
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def notebook_of(script):
    with open(script) as f:
        cells = cells_of(f.read())
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def text_of(script):
    return json.dumps(notebook_of(script), indent=1, ensure_ascii=False) + "\n"


def main():
    for script in sorted(glob.glob(os.path.join(FOLDER, "0*.py"))):
        target = script[:-3] + ".ipynb"
        with open(target, "w") as f:
            f.write(text_of(script))
        print("wrote", target)


if __name__ == "__main__":
    main()
