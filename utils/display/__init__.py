"""What the notebooks show: plots, the playground and formula widgets, the device picker."""
