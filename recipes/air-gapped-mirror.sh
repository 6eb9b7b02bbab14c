#!/usr/bin/env bash
# Build a zoo mirror folder for machines without internet; see air-gapped-mirror.md.
#
#   recipes/air-gapped-mirror.sh DEST [ITEM...]
#
# DEST   the mirror folder to fill (created; default ./mmsctl-mirror)
# ITEM   what goes in (default: squeezenet):
#          squeezenet, resnet-18 …   a zoo name or alias: pulled with `mmsctl zoo pull`
#          ./model.mar               an archive you built: copied as it is
#          sitemodel=./checkpoint/   an MXNet checkpoint folder: packed with `mmsctl archive create`
#
# Run it with mmsctl on PATH (`source .venv/bin/activate`). MMSCTL_ZOO_URL / MMSCTL_CACHE_DIR are
# used for the pulls as usual. At the end the mirror is checked offline with an empty cache.
set -euo pipefail

step() { printf '==> %s\n' "$*" >&2; }

DEST="${1:-mmsctl-mirror}"
shift || true
[[ $# -gt 0 ]] || set -- squeezenet

check_cache="$(mktemp -d)"
trap 'rm -rf "$check_cache"' EXIT
trap 'exit 130' INT TERM

mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"
names=()
for item in "$@"; do
  if [[ $item == *=* ]]; then
    name="${item%%=*}" dir="${item#*=}"
    step "mmsctl archive create $dir --model-name $name"
    mmsctl archive create "$dir" --model-name "$name" --export-path "$DEST" --force >/dev/null
  elif [[ -f $item ]]; then
    name="$(basename "$item")" name="${name%.mar}"
    step "copy $item"
    cp "$item" "$DEST/$name.mar"
  else
    step "mmsctl zoo pull $item"
    path="$(mmsctl zoo pull "$item")"
    name="$(basename "$path" .mar)"
    if [[ ! $path -ef $DEST/$name.mar ]]; then  # (a folder mirror's own file is already there)
      cp "$path" "$DEST/.$name.mar.part" && mv "$DEST/.$name.mar.part" "$DEST/$name.mar"
    fi
  fi
  names+=("$name")
done

step "SHA256SUMS"
(cd "$DEST" && sha256sum -- *.mar > SHA256SUMS)

step "checking the mirror offline, with an empty cache"
for name in "${names[@]}"; do
  MMSCTL_OFFLINE=1 MMSCTL_ZOO_URL="$DEST" MMSCTL_CACHE_DIR="$check_cache" mmsctl zoo path "$name" >/dev/null
done

cat >&2 <<EOF

Mirror ready: $DEST (${names[*]})
Copy it to the offline machine (rsync, USB disk, an internal HTTP server), check it there with
  (cd $DEST && sha256sum -c SHA256SUMS)
then use it:
  export MMSCTL_ZOO_URL=$DEST MMSCTL_OFFLINE=1
  mmsctl predict ${names[0]} kitten.jpg
  mmsctl serve start --models ${names[0]}
EOF
