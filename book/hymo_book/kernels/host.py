"""Empty: its tables of the host's share of a forward read runs the book no longer keeps.

Chapter 21's first cell still imports it (as ``kh``) and uses nothing from it; delete this
file with that import.
"""
