#!/usr/bin/env bash
# Quickstart: the MMS "serve squeezenet, curl a kitten" walkthrough, done with mmsctl.
#
#   source .venv/bin/activate                      # mmsctl on PATH, as after `make demo`
#   recipes/quickstart.sh                          # squeezenet from the zoo, kitten.jpg from the MMS docs
#   recipes/quickstart.sh ./squeezenet_v1.1.mar ~/kitten.jpg
#
# $1  model: a zoo name, or a path to a .mar/.tar.gz/.model archive or a model folder
#     (./name for a folder here; a plain word is always the zoo's) (default: squeezenet)
# $2  image to send (default: kitten.jpg; downloaded from the MMS docs when missing and online)
#
# Environment (all optional):
#   PORT             inference API port; management is PORT+1, metrics PORT+2 (default: 8080)
#   WORKERS          workers after `mmsctl scale` (default: 2)
#   KEEP_RUNNING=1   leave the server running at the end (stop it with `mmsctl serve stop --name quickstart`)
#
# The server is stopped on exit, also on errors and Ctrl+C.
set -euo pipefail

step() { printf '\n==> %s\n' "$*" >&2; }

MODEL="${1:-squeezenet}"
IMAGE="${2:-kitten.jpg}"
PORT="${PORT:-8080}"
WORKERS="${WORKERS:-2}"
NAME=quickstart
INFERENCE="http://127.0.0.1:${PORT}"
# Every mmsctl command below talks to this server: local:quickstart is its context (even when other
# servers run here, and whatever `mmsctl context use` says).
CONTEXT="local:$NAME"

started=0
tmp=""
cleanup() {
  local rc=$?
  if [[ $started == 1 && ${KEEP_RUNNING:-0} != 1 ]]; then
    step "mmsctl serve stop --name $NAME"
    mmsctl serve stop --name "$NAME" || rc=1
  fi
  [[ -n $tmp ]] && rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ ! -f $IMAGE ]]; then
  if [[ $IMAGE != kitten.jpg || ${MMSCTL_OFFLINE:-0} == 1 ]]; then
    echo "error: image not found: $IMAGE" >&2
    exit 2
  fi
  step "fetching the kitten from the MMS docs"
  tmp="$(mktemp -d)"
  curl -sSfL -o "$tmp/kitten.jpg" https://s3.amazonaws.com/model-server/inputs/kitten.jpg
  IMAGE="$tmp/kitten.jpg"
fi

step "mmsctl serve start --models squeezenet=$MODEL --port $PORT"
started=1
mmsctl serve start --name "$NAME" --models "squeezenet=$MODEL" --workers 1 --port "$PORT"

step "curl -X POST $INFERENCE/predictions/squeezenet -T $(basename "$IMAGE")"
curl -sS --fail-with-body -X POST "$INFERENCE/predictions/squeezenet" -T "$IMAGE"
echo

step "mmsctl models list --context $CONTEXT"
mmsctl models list --context "$CONTEXT"

step "mmsctl scale squeezenet --min-workers $WORKERS --wait --context $CONTEXT"
mmsctl scale squeezenet --min-workers "$WORKERS" --wait --timeout 120 --context "$CONTEXT"

step "mmsctl models describe squeezenet --context $CONTEXT"
mmsctl models describe squeezenet --context "$CONTEXT"
