"""The book's pages: the static website, and the generated parts of the landing pages.

    build.py        the website, built offline by Jupyter Book 1 (``python3 -m hymo_book.site``)
    offline.py      the Sphinx extension that serves MathJax and the widget embedder itself
    reading.py      the Sphinx extension that notes each saved widget view, each script once
    legibility.py   at what size a figure's text shows on a page
    vendor/         the widget embedder's files, vendored (their README says how)
    readme.py       README.md's generated sections: the parts of the book, the headline numbers
    book_index.py   book/README.md's chapter table
    markers.py      the markers between which a generated section is rewritten
"""
