"""The machine and its processes: versions, CPU features, memory, disk and devices; commands that die with
their parent; peak memory measured in a fresh process. Imports only `utils`' top-level modules."""
