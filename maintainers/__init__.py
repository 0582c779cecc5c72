"""Maintainers' tools, never imported by a notebook or by `utils`: building the offline pairs (the setup runs them),
prefetching the real pairs, the benchmark, running notebooks headless, refreshing their reference outputs, the
README's figures and quoted times. May import anything in `utils`; see README.md here.
"""
