"""What the notebooks show: plots, the playground widgets, the device picker."""
