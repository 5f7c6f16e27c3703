# The engine and the example worker (docker compose); dev mode needs no Docker.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY streamproc ./streamproc
RUN pip install --no-cache-dir ".[schema-registry]"
ENV STREAMPROC_LOG_FORMAT=json
ENTRYPOINT []
