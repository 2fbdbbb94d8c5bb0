"""The admin dashboard: a FastAPI app over the core's admin operations, server-rendered
HTML, and Prometheus /metrics. ``memorybot dashboard`` serves it on its own;
:func:`serve_dashboard` serves it inside another command's event loop."""

from bots.dashboard.app import create_app
from bots.dashboard.server import DashboardServer, running_dashboard, serve_dashboard

__all__ = ["DashboardServer", "create_app", "running_dashboard", "serve_dashboard"]
