"""The docs' table of the supported NumPy API (docs/reference/numpy-api.md) is the one the registries generate."""
from pathlib import Path

from tracejit.numpy import api_table

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "numpy-api.md"


def test_docs_api_table_is_up_to_date():
    text = PAGE.read_text()
    start, end = text.index(api_table.START), text.index(api_table.END) + len(api_table.END)
    assert text[start:end] == api_table.table(), (
        "docs/reference/numpy-api.md's Supported NumPy API table is out of date: run `make docs`, or "
        "`python -m tracejit.numpy.api_table --update docs/reference/numpy-api.md`")
