"""book/README.md's chapter table is the reading order with each chapter's own title, and
README.md's list of parts names the same chapters (hymo_book.site.book_index and
hymo_book.site.readme)."""

from hymo_book.site.book_index import INDEX, rewrite
from hymo_book.site.readme import README, parts_section
from hymo_book.site.readme import rewrite as rewrite_readme  # noqa: I001


def test_the_book_index_is_up_to_date():
    assert rewrite(INDEX, check=True), "run `python3 book/hymo_book/site/book_index.py`"


def test_the_readme_lists_the_parts_in_order():
    assert rewrite_readme(README, check=True), "run `python3 book/hymo_book/site/readme.py`"
    assert "Beyond the document" in parts_section()
