#!/usr/bin/env bash
# Debian packages the tests and benchmarks use: PostgreSQL (a real server the
# store tests start on loopback), Chromium (the crawl report's rendering test
# opens the report headless; the render tests drive it), nginx and python3-doc
# (the real-web bench's nginx is tested serving the python3-doc pages;
# bench/cpu_per_page.py and bench/realweb.py read them too), Prometheus (the metrics
# tests scrape a crawl with a real one and check deploy/prometheus/ with its promtool).
# Installs only what is missing, and only as root; otherwise says what is missing
# (tests that need it skip with a reason; under CI the metrics tests fail instead).
# "bench" (make bench) needs nothing more than the tests.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
# redis-server: the Redis frontier's tests and make cluster-demo start one on loopback
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
[ -d /usr/share/doc/python3/html ] || need+=(python3-doc)
[ -x /usr/sbin/nginx ] || need+=(nginx)  # bench/realweb_nginx.py, tests/test_realweb_nginx.py
# prometheus (and promtool): tests/test_metrics_prometheus.py scrapes a crawl with a real
# one on loopback and checks deploy/prometheus/ with promtool
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || need+=(prometheus)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${need[*]}"
  # The tests and benches start their own servers on loopback and stop them: the
  # packages' services (nginx on port 80, a PostgreSQL cluster, Prometheus on 9090) are
  # not started.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "missing Debian packages (what needs them will skip): ${need[*]}" >&2
fi
