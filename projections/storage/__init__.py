"""The event store and its adapters (docs/design.md, "Layers"): how the log is stored and
encrypted (`store`, `keys`, `text_keys`), appended in groups (`group_commit`), created and
migrated (`db`, `releases`), followed by notification channels (`channels`) and watched for
outages (`health`); the handle a process holds on it (`runtime`); and the state kept beside the
log rather than in it: password checks (`passwords`), the dashboard's sessions (`sessions`) and
the Send page's drafts (`drafts`).  The read models are the modules of `projections/` itself."""
