"""EAGLE-3 draft heads for a main model of the course, trained on this CPU (prototype).

See `eagle3.settings` for the stages in order; `python -m eagle3.run --preset quick` runs them all.
"""
