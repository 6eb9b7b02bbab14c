#!/usr/bin/env bash
# Quickstart: the MMS "serve squeezenet, curl a kitten" walkthrough, done with mmsctl.
#
#   recipes/quickstart.sh                          # squeezenet from the zoo, kitten.jpg from the MMS docs
#   recipes/quickstart.sh ./squeezenet_v1.1.mar ~/kitten.jpg
#
# $1  model: a zoo name, a .mar/.tar.gz/.model archive or a model folder (default: squeezenet)
# $2  image to send (default: kitten.jpg; downloaded from the MMS docs when missing and online)
#
# Environment (all optional):
#   MMSCTL           the mmsctl command (default: mmsctl; e.g. ".venv/bin/mmsctl" or "python -m mmsctl")
#   HOST             address to bind and call (default: 127.0.0.1)
#   INFERENCE_PORT   default 8080    MANAGEMENT_PORT  default 8081    METRICS_PORT  default 8082
#   WORKERS          workers after `mmsctl scale` (default: 2)
#   KEEP_RUNNING=1   leave the server running at the end (stop it with `mmsctl serve stop --name quickstart`)
#
# The server is stopped on exit, also on errors and Ctrl+C.
set -euo pipefail

# shellcheck disable=SC2206  # MMSCTL may be a command with arguments, e.g. "python -m mmsctl"
MMSCTL_CMD=(${MMSCTL:-mmsctl})
mmsctl() { "${MMSCTL_CMD[@]}" "$@"; }
step() { printf '\n==> %s\n' "$*" >&2; }

MODEL="${1:-squeezenet}"
IMAGE="${2:-kitten.jpg}"
HOST="${HOST:-127.0.0.1}"
INFERENCE_PORT="${INFERENCE_PORT:-8080}"
MANAGEMENT_PORT="${MANAGEMENT_PORT:-8081}"
METRICS_PORT="${METRICS_PORT:-8082}"
WORKERS="${WORKERS:-2}"
NAME=quickstart

INFERENCE="http://${HOST}:${INFERENCE_PORT}"
MANAGEMENT="http://${HOST}:${MANAGEMENT_PORT}"

# Every mmsctl command below talks to this server, whatever `mmsctl context use` says elsewhere
# (the same environment variables point mmsctl at a server in CI).
export MMSCTL_CONTEXT=local
export MMSCTL_INFERENCE_URL="$INFERENCE" MMSCTL_MANAGEMENT_URL="$MANAGEMENT"
export MMSCTL_METRICS_URL="http://${HOST}:${METRICS_PORT}"
unset MMSCTL_TOKEN_FILE

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

step "mmsctl serve start --models squeezenet=$MODEL"
started=1
mmsctl serve start --name "$NAME" --models "squeezenet=$MODEL" --workers 1 \
  --inference-address "$INFERENCE" --management-address "$MANAGEMENT" \
  --metrics-address "http://${HOST}:${METRICS_PORT}"

step "curl -X POST $INFERENCE/predictions/squeezenet -T $(basename "$IMAGE")"
curl -sS --fail-with-body -X POST "$INFERENCE/predictions/squeezenet" -T "$IMAGE"
echo

step "mmsctl models list"
mmsctl models list

step "mmsctl scale squeezenet --min-workers $WORKERS --wait"
mmsctl scale squeezenet --min-workers "$WORKERS" --wait --timeout 120

step "mmsctl models describe squeezenet"
mmsctl models describe squeezenet

