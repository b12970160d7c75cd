#!/usr/bin/env bash
# Stops what start.sh started in the run directory given (by its pid files only).
set -u
R=${1:?usage: stop.sh CONTROLPLANE_RUN}
for f in controller-manager apiserver etcd; do
  if [ -f "$R/$f.pid" ]; then kill "$(cat "$R/$f.pid")" 2>/dev/null; rm -f "$R/$f.pid"; fi
done
