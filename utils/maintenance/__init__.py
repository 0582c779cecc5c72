"""Maintainers' tools, never imported by a notebook: running notebooks headless and refreshing their reference
outputs (`python3 tutorial.py refresh-outputs`), collecting the README's figures. May import anything.
"""
