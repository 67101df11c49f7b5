# syntax=docker/dockerfile:1
# The provenance service: one image for the API (`provenance serve`) and the workers (`provenance worker`).

# ---- build: dependencies from the hash-pinned lock in their own layer, then the project itself
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 UV_LINK_MODE=copy
RUN python -m pip install "uv==0.13.9" && python -m venv /opt/venv
WORKDIR /src
COPY requirements.lock ./
RUN uv pip sync --python /opt/venv/bin/python --require-hashes --compile-bytecode requirements.lock
COPY pyproject.toml README.md ./
COPY estimator ./estimator
COPY prompts ./prompts
COPY provenance_api ./provenance_api
RUN uv pip install --python /opt/venv/bin/python --no-deps . \
 && /opt/venv/bin/python -c "import provenance_api.http.app, estimator.loo.judged"

# ---- run: the virtualenv only, as a non-root user
FROM python:3.11-slim AS runtime
RUN groupadd --system --gid 10001 provenance \
 && useradd --system --uid 10001 --gid provenance --home-dir /data --shell /usr/sbin/nologin provenance \
 && mkdir -p /data && chown provenance:provenance /data && chmod 700 /data
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    PROVENANCE_DATA_DIR=/data \
    PROVENANCE_HOST=0.0.0.0 \
    PROVENANCE_PORT=8000
USER provenance:provenance
WORKDIR /data
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('PROVENANCE_PORT', '8000')}/healthz\", timeout=4)"]
CMD ["provenance", "serve"]
