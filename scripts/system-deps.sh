#!/usr/bin/env bash
# Debian packages for servers the tests start on loopback (PostgreSQL).
# Installs only what is missing, and only as root; otherwise says what is missing.
set -euo pipefail
need=()
command -v pg_ctlcluster >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "missing Debian packages (tests needing them will skip): ${need[*]}" >&2
fi
