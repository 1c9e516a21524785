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
# As the container's PID 1, python would ignore SIGTERM (no handler, and the kernel drops default-
# action signals to PID 1): every Pod deletion would wait out the 30 s grace period. A handler
# exits at once.
exec /usr/bin/python3 -c 'import os, runpy, signal
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
runpy.run_module("searx.webapp", run_name="__main__", alter_sys=True)' "$@"
