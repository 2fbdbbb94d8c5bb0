"""The admin dashboard: a FastAPI app, server-rendered."""
