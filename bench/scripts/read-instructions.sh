#!/usr/bin/env bash
# Instructions a GET /api/v1/listings/{n} costs the serving process in user
# space, counted by valgrind's callgrind: unlike requests a second on a
# shared machine, the count does not move with the load next door.
#
#   bench/scripts/read-instructions.sh BENCH_BINARY [full|unguarded|bare] [SECONDS]
#
# Starts `BENCH_BINARY serve-app` (or `serve-bare` with the listing's own
# body) under callgrind with counting off, warms it with `wrk`, counts for
# SECONDS (default 15) of `wrk -c8`, and prints the requests served and the
# instructions a request. Statements run by sqlx's SQLite threads are left
# out: a cached read runs none, and the in-process workers' polls would
# otherwise be spread over however few requests valgrind's pace allows.
# Needs valgrind and wrk (Debian packages).
set -euo pipefail
binary=$(realpath "$1")
stack=${2:-full}
seconds=${3:-15}
work=$(mktemp -d)
trap 'pkill -f "callgrind-out-file=$work/" 2>/dev/null || true; pkill -f "data-dir $work/" 2>/dev/null || true; rm -rf "$work"' EXIT

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
wait_for() { for _ in $(seq 1 120); do [ -s "$1" ] && return 0; sleep 1; done; echo "no announcement in $1" >&2; exit 1; }

server=(serve-app --data-dir "$work/app" --stack "$stack" --listings 0)
headers=()
if [ "$stack" = bare ]; then
    # The bare handler answers the listing's own body: read it once from an
    # API started without valgrind.
    mkdir -p "$work/body"
    (sleep 600 | "$binary" serve-app --data-dir "$work/body" --stack full --listings 0 > "$work/body.json.out" &)
    wait_for "$work/body.json.out"
    curl -fsS -H "Authorization: Bearer $(field "$work/body.json.out" key)" \
        "http://127.0.0.1:$(field "$work/body.json.out" port)/api/v1/listings/$(field "$work/body.json.out" listing_number)" > "$work/body.json"
    pkill -f "data-dir $work/body" || true
    server=(serve-bare --body "$work/body.json")
fi
mkdir -p "$work/app"
(sleep 600 | valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.out" \
    "$binary" "${server[@]}" > "$work/announce" 2> "$work/valgrind.log" &)
wait_for "$work/announce"
port=$(field "$work/announce" port)
if [ "$stack" = bare ]; then
    url="http://127.0.0.1:$port/bare"
else
    url="http://127.0.0.1:$port/api/v1/listings/$(field "$work/announce" listing_number)"
    headers=(-H "Authorization: Bearer $(field "$work/announce" key)")
fi
wrk -t1 -c4 -d3s "${headers[@]}" "$url" > /dev/null
pid=$(pgrep -f "callgrind-out-file=$work/cg.out" | head -1)
callgrind_control -i on "$pid" > /dev/null
wrk -t1 -c8 -d"${seconds}s" "${headers[@]}" "$url" > "$work/wrk"
callgrind_control -i off "$pid" > /dev/null
requests=$(awk '/requests in/ {print $1}' "$work/wrk")
kill "$pid"
for _ in $(seq 1 60); do pgrep -f "callgrind-out-file=$work/cg.out" > /dev/null || break; sleep 1; done
total=$(awk '/^totals:/ {print $2}' "$work/cg.out")
sqlite=$(callgrind_annotate --inclusive=yes "$work/cg.out" 2>/dev/null \
    | awk '!found && /ExecuteIter as core::iter::traits::iterator::Iterator>::next \[/ {gsub(",", "", $1); print $1; found = 1}')
sqlite=${sqlite:-0}
echo "{\"stack\":\"$stack\",\"requests\":$requests,\"instructions\":$total,\"sqlite_statements\":$sqlite,\"per_request\":$(( (total - sqlite) / requests ))}"
