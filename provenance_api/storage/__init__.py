"""Storage: SQLAlchemy 2 async models, sessions, migrations and CRUD."""
