"""Lists uploaded on the dashboard's Send and Contacts pages, read within the limits of a list
(docs/dashboard.md, "Limits of a list"): what reads a file imports nothing of the dashboard."""
