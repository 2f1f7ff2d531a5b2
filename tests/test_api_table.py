"""README's table of the supported NumPy API is the one the registries generate."""
from pathlib import Path

from tracejit.numpy import api_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_api_table_is_up_to_date():
    text = README.read_text()
    start, end = text.index(api_table.START), text.index(api_table.END) + len(api_table.END)
    assert text[start:end] == api_table.table(), (
        "README's Supported NumPy API table is out of date: replace it with the output of "
        "`python -m tracejit.numpy.api_table --update README.md`")
