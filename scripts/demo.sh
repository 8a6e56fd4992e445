#!/usr/bin/env bash
# The main job: export ResNet-50 and the BERT-like encoder (random weights, fixed seed) into a
# model repository laid out as Triton's, and serve them over KServe v2 (HTTP and gRPC) with
# Prometheus metrics. Prints the URLs and a sample request, sends it, and serves until Ctrl-C.
#
#   scripts/demo.sh                      # ports 8000 (HTTP), 8001 (gRPC), 8002 (metrics)
#   HTTP_PORT=9000 scripts/demo.sh       # other ports: HTTP_PORT, GRPC_PORT, METRICS_PORT
#   scripts/demo.sh --bench              # instead: benchmark ResNet-50 with `streamline bench`
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
MODEL_DIR=${SL_MODEL_DIR:-$BUILD_DIR/models}
REPO=${REPO:-$BUILD_DIR/model-repository}
HTTP_PORT=${HTTP_PORT:-8000}
GRPC_PORT=${GRPC_PORT:-8001}
METRICS_PORT=${METRICS_PORT:-8002}
SL="$BUILD_DIR/tools/streamline"

"$SL" --version
if [ "${1:-}" = "--bench" ]; then
  shift
  .venv/bin/python scripts/export_models.py --out "$MODEL_DIR" --models resnet50
  if [ $# -eq 0 ]; then set -- --seconds 10 --warmup 2; fi
  exec "$SL" bench "$MODEL_DIR/resnet50.onnx" "$@"
fi

.venv/bin/python scripts/export_models.py --out "$MODEL_DIR" --models resnet50,bert

# The built-in repository: one folder per model, version 1, a config.pbtxt each.
mkdir -p "$REPO/resnet50/1" "$REPO/bert/1"
ln -f "$MODEL_DIR/resnet50.onnx" "$REPO/resnet50/1/model.onnx" 2>/dev/null || cp "$MODEL_DIR/resnet50.onnx" "$REPO/resnet50/1/model.onnx"
ln -f "$MODEL_DIR/bert.onnx" "$REPO/bert/1/model.onnx" 2>/dev/null || cp "$MODEL_DIR/bert.onnx" "$REPO/bert/1/model.onnx"
cat > "$REPO/resnet50/config.pbtxt" <<'EOF'
name: "resnet50"
backend: "streamline"
max_batch_size: 8
input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 1000 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 2000 }
EOF
cat > "$REPO/bert/config.pbtxt" <<'EOF'
name: "bert"
backend: "streamline"
max_batch_size: 8
input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, 768 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
EOF

"$SL" serve --model-repository "$REPO" --http-port "$HTTP_PORT" --grpc-port "$GRPC_PORT" \
  --metrics-port "$METRICS_PORT" &
SERVER=$!
# Never leave a server behind: stop it on every way out of this script. Ctrl-C (or a TERM sent
# to the script) drains the server and ends the demo with status 0.
stop_server() {
  if kill -0 "$SERVER" 2>/dev/null; then
    kill -TERM "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
}
trap stop_server EXIT
trap 'echo; echo "demo: stopping the server"; stop_server; exit 0' INT TERM
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$HTTP_PORT/v2/health/ready" >/dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "demo: the server exited" >&2; exit 1; }
  sleep 0.2
done

SAMPLE='{"inputs":[{"name":"input_ids","shape":[1,8],"datatype":"INT64","data":[101,7592,1010,2088,999,2023,2003,102]}]}'
cat <<EOF

Serving $REPO:
  HTTP (KServe v2)   http://127.0.0.1:$HTTP_PORT/v2
  gRPC (KServe v2)   127.0.0.1:$GRPC_PORT
  Prometheus         http://127.0.0.1:$METRICS_PORT/metrics

Sample request (BERT-like encoder, 8 token ids):
  curl -s http://127.0.0.1:$HTTP_PORT/v2/models/bert/infer -d '$SAMPLE'
EOF
echo
echo "Its answer (first values of last_hidden_state):"
# The whole answer is about 67 KB; print its start. (Piping curl into head would break the pipe
# and, under pipefail, end the script.)
ANSWER=$(curl -sS "http://127.0.0.1:$HTTP_PORT/v2/models/bert/infer" -d "$SAMPLE")
printf '%s...\n' "${ANSWER:0:400}"

echo
echo "Also: $SL perf -m resnet50 -u 127.0.0.1:$HTTP_PORT --concurrency-range 1:4:1   (Ctrl-C stops the server)"
# `wait` returns early when a trapped signal arrives; the INT/TERM trap then stops the server.
status=0
wait "$SERVER" || status=$?
echo "demo: the server exited with status $status" >&2
exit "$status"
