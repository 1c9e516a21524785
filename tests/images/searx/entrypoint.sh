#!/bin/sh
# SearXNG's image interface, mapped onto Debian's searx 1.1:
#   SEARXNG_SETTINGS_PATH  the settings file (the operator mounts its ConfigMap and sets this) -> SEARX_SETTINGS_PATH
#   SEARXNG_SECRET         the secret key (from the operator's Secret)                         -> SEARX_SECRET
#   SEARXNG_BIND_ADDRESS   the listen address, when set                                        -> SEARX_BIND_ADDRESS
# The port is the settings' server.port (the operator sets 8080). searx's settings loader has the
# same `use_default_settings` (engines keep_only/remove) as SearXNG's.
set -eu
export SEARX_SETTINGS_PATH="${SEARXNG_SETTINGS_PATH:-/etc/searxng/settings.yml}"
if [ -n "${SEARXNG_SECRET:-}" ]; then
  export SEARX_SECRET="$SEARXNG_SECRET"
fi
if [ -n "${SEARXNG_BIND_ADDRESS:-}" ]; then
  export SEARX_BIND_ADDRESS="$SEARXNG_BIND_ADDRESS"
fi
# The root filesystem is read-only under the operator's securityContext: no bytecode caches.
export PYTHONDONTWRITEBYTECODE=1 SEARX_DEBUG=0
exec /usr/bin/python3 -m searx.webapp "$@"
