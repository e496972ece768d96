"""Lists uploaded on the dashboard's Send and Contacts pages, read within the limits of a list
(docs/dashboard.md, "Limits of a list") on child processes of their own (children.py): what
reads a file imports nothing of the dashboard, so a child starts light."""
