#!/usr/bin/env bash
# The S3 event pipeline on AWS Lambda: an image lands in the input bucket, the prediction
# appears in the output bucket. Build, deploy, send one image through, tear down.
#
#   INPUT_BUCKET=my-photos OUTPUT_BUCKET=my-predictions recipes/lambda-s3-pipeline/run.sh squeezenet kitten.jpg
#
# $1  model: a zoo name or a .mar archive (uploaded to a versioned model bucket; the function pins that version)
# $2  an image file to send through the pipeline
#
# Environment:
#   INPUT_BUCKET, OUTPUT_BUCKET   required; created (and later deleted) if they do not exist, used as they are if they do
#   NAME          function name (default: mmsctl-pipeline)
#   PUSH=0        do not build and push the image (one is already in ECR: mmsctl-lambda/NAME:latest)
#   WAIT          seconds to wait for the prediction (default: 120)
#   KEEP=1        leave everything deployed at the end (remove it later with `mmsctl lambda destroy NAME`)
#
# Everything the recipe deployed is destroyed on exit, also on errors and Ctrl+C, unless KEEP=1.
set -euo pipefail

step() { printf '\n==> %s\n' "$*" >&2; }

MODEL="${1:?usage: run.sh MODEL IMAGE}"
IMAGE="${2:?usage: run.sh MODEL IMAGE}"
NAME="${NAME:-mmsctl-pipeline}"
INPUT_BUCKET="${INPUT_BUCKET:?set INPUT_BUCKET}"
OUTPUT_BUCKET="${OUTPUT_BUCKET:?set OUTPUT_BUCKET}"
WAIT="${WAIT:-120}"

if [[ ! -f $IMAGE ]]; then
  echo "error: image not found: $IMAGE" >&2
  exit 2
fi

deployed=0
work=""
cleanup() {
  local rc=$?
  if [[ $deployed == 1 && ${KEEP:-0} != 1 ]]; then
    step "mmsctl lambda destroy $NAME"
    mmsctl lambda destroy "$NAME" >&2 || rc=1
  fi
  [[ -n $work ]] && rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
work="$(mktemp -d)"

if [[ ${PUSH:-1} == 1 ]]; then
  step "build the image (Lambda's Python base, mmsctl, mxnet 1.9.1) and push it to ECR"
  mmsctl lambda build "$MODEL" --out "$work/build" --push --name "$NAME" >&2
fi

step "deploy: model bucket, least-privilege role, function, S3 trigger, keep-warm schedule"
deployed=1
mmsctl lambda deploy "$NAME" --model "$MODEL" --memory 1024 --timeout 30 \
  --input-bucket "$INPUT_BUCKET" --input-prefix incoming/ \
  --output-bucket "$OUTPUT_BUCKET" --output-prefix predictions/ --warm 5m >&2

step "what was deployed"
mmsctl lambda describe "$NAME" >&2

step "one image through the pipeline: upload to s3://$INPUT_BUCKET/incoming/, wait for the prediction"
mmsctl lambda invoke "$NAME" --s3 "$IMAGE" --timeout "$WAIT" -o json
