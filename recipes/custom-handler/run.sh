#!/usr/bin/env bash
# Custom handler: archive sum_service/handler.py, run it locally, serve it, curl it.
#
#   source .venv/bin/activate        # mmsctl on PATH, as after `make demo`
#   recipes/custom-handler/run.sh
#
# Environment (all optional):
#   EXPORT_DIR       where adder.mar is written (default: a temporary folder, removed at the end)
#   PORT             inference API port; management is PORT+1, metrics PORT+2 (default: 8080)
#
# The server is stopped on exit, also on errors and Ctrl+C.
set -euo pipefail

step() { printf '\n==> %s\n' "$*" >&2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORT="${PORT:-8080}"
INFERENCE="http://127.0.0.1:${PORT}"
NAME=custom-handler

started=0
tmp="$(mktemp -d)"
cleanup() {
  local rc=$?
  if [[ $started == 1 ]]; then
    step "mmsctl serve stop --name $NAME"
    mmsctl serve stop --name "$NAME" || rc=1
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

EXPORT_DIR="${EXPORT_DIR:-$tmp}"
MAR="$EXPORT_DIR/adder.mar"

step "mmsctl archive create sum_service --handler handler:handle --extra-files settings.json"
mmsctl archive create "$HERE/sum_service" --model-name adder --handler handler:handle \
  --extra-files "$HERE/settings.json" --description "adds up numbers" \
  --export-path "$EXPORT_DIR" --force

step "mmsctl archive inspect adder.mar"
mmsctl archive inspect "$MAR"

step "mmsctl predict adder.mar numbers.json -o json   (local, no server)"
mmsctl predict "$MAR" "$HERE/numbers.json" -o json

step "echo '[10, 20, 12]' | mmsctl predict adder.mar - -o json"
echo '[10, 20, 12]' | mmsctl predict "$MAR" - -o json

step "mmsctl serve start --models adder=adder.mar --port $PORT"
started=1
mmsctl serve start --name "$NAME" --models "adder=$MAR" --port "$PORT"

step "curl -X POST $INFERENCE/predictions/adder -H 'Content-Type: application/json' -d '{\"numbers\": [1, 2, 3]}'"
curl -sS --fail-with-body -X POST "$INFERENCE/predictions/adder" \
  -H 'Content-Type: application/json' -d '{"numbers": [1, 2, 3]}'
echo

step "curl -X POST $INFERENCE/predictions/adder -T numbers.json"
curl -sS --fail-with-body -X POST "$INFERENCE/predictions/adder" -T "$HERE/numbers.json"
echo

step "curl -i ... -d 'one two'   (the handler answers 400 with an MMS-style error body)"
curl -sS -i -X POST "$INFERENCE/predictions/adder" -H 'Content-Type: text/plain' -d 'one two'
echo
