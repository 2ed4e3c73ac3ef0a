#!/usr/bin/env bash
# Debian packages the tests and benchmarks use: PostgreSQL (a real server the
# store tests start on loopback) and, with "bench", python3-doc (530 real HTML
# pages for bench/cpu_per_page.py), and Chromium (the crawl report's rendering test
# opens the report headless; the render tests drive it). Installs only what is missing, and only as
# root; otherwise says what is missing (tests that need it skip with a reason).
# With "bench" also nginx, the real web server bench/realweb.py starts.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
if [ "${1:-}" = "bench" ] && [ ! -d /usr/share/doc/python3/html ]; then need+=(python3-doc); fi
if [ "${1:-}" = "bench" ] && [ ! -x /usr/sbin/nginx ]; then need+=(nginx); fi  # bench/realweb.py
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "missing Debian packages (what needs them will skip): ${need[*]}" >&2
fi
