"""The `sandesh` command and its wiring: the entry points, the settings-to-runtime bootstrap,
the server and its guarded worker, logging, metrics, and how the command speaks."""
