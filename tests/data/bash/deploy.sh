#!/usr/bin/env bash
# Deploy the application to a target host.
set -euo pipefail

TARGET_HOST="${TARGET_HOST:-localhost}"
RELEASE_DIR=/srv/app/releases

log() {
    printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

function build_release {
    local version=$1
    log "building $version"
    mkdir -p "$RELEASE_DIR/$version"
    tar -czf "$RELEASE_DIR/$version.tgz" -C dist .
}

# Copy the release and switch the symlink.
upload() {
    scp "$RELEASE_DIR/$1.tgz" "$TARGET_HOST:/tmp/"
    ssh "$TARGET_HOST" bash <<REMOTE
set -e
mkdir -p /srv/app/current
tar -xzf /tmp/$1.tgz -C /srv/app/current
REMOTE
}

case "${1:-}" in
    build) build_release "${2:?version}" ;;
    upload) upload "${2:?version}" ;;
    *) echo "usage: $0 build|upload VERSION" >&2; exit 2 ;;
esac

for f in "$RELEASE_DIR"/*.tgz; do
    [ -e "$f" ] || continue
    log "found $f"
done
