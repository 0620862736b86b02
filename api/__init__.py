"""The REST API (FastAPI) over the serving layer: `python -m api` or `make api`."""
