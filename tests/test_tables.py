"""The one table renderer: aligned text, HTML with escaped cells, footers, bad rows."""

import pytest

from hymo_mini.analysis.tables import RenderedTable, TextTable


def test_text_is_aligned_per_column():
    table = TextTable(("name", "count"), [("a", "1"), ("longer", "1,000")], title="t",
                      footer=[("Total", "1,001")])
    lines = str(table).splitlines()
    assert lines[0] == "t"
    body = [line for line in lines[1:] if not set(line) <= {"-"}]
    assert len({len(line) for line in body}) == 1  # right-aligned last column: same width
    assert body[1].startswith("a ") and body[1].endswith("    1")
    assert lines.index(body[-1]) == len(lines) - 1  # the footer comes last, after a rule
    assert set(lines[-2]) == {"-"}


def test_html_escapes_and_bolds_the_footer():
    html = TextTable(("x",), [("<b>&",)], footer=[("sum",)])._repr_html_()
    assert "&lt;b&gt;&amp;" in html and "<b>sum</b>" in html


@pytest.mark.parametrize("kwargs, message", [
    (dict(header=("a", "b"), rows=[("1",)]), "a row has 1 cells, the header 2"),
    (dict(header=("a",), rows=[("1",)], align="x"), "align must be one 'l' or 'r'"),
])
def test_bad_tables_say_why(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TextTable(**kwargs)


def test_a_rendered_table_prints_its_table():
    class Counts(RenderedTable):
        def _table(self):
            return TextTable(("k", "v"), [("a", "1")])

    assert str(Counts()) == str(Counts()._table()) and repr(Counts()) == str(Counts())
    assert Counts()._repr_html_() == Counts()._table()._repr_html_()
