"""Maintainers' tools, never imported by a notebook or by `utils`: running notebooks headless, refreshing their
reference outputs (`python3 tutorial.py refresh-outputs`), the README's figures and quoted times, and fetching the
real pairs ahead of a workshop (`python3 tutorial.py prefetch`). May import anything in `utils`; see README.md here.
"""
