"""The web room: the FastAPI app (JSON API under /api/v1, the browser UI at /)."""
