"""hymo_book: the book's helpers, beside the chapters that use them (not part of hymo_mini)."""
