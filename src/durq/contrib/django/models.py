"""No Django models: durq keeps its own tables (created by ``manage.py migrate`` through
the post_migrate hook in apps.py, which Django sends only to apps with a models module)."""
