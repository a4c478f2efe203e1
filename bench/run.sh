#!/usr/bin/env bash
# bench/run.sh: lavender's benchmarks, side by side with node_exporter.
#
#   bench/run.sh                 # everything (about 25 minutes with the 10-minute footprint)
#   bench/run.sh scrape webhook  # only some sections
#
# Sections: deps scrape detect detect-prom webhook bigwebhook serve-rss footprint runlog gobench
# (deps always runs), and pressure, which only runs when named:
#
#   sudo bench/run.sh pressure   # a real thrash, at most PRESSURE_SECONDS
#
# pressure needs root, PSI, swapon and a memory cgroup (v2, or v1's memory
# hierarchy); elsewhere it says why and skips. It makes a 2 GiB swap file
# and runs a memory hog, lavender serve and node_exporter in a 256 MiB
# memory cgroup, and it always removes the swap file and the cgroup.
#
# Results go to stdout as Markdown tables; the child processes' logs live
# in a temporary directory that is removed at the end.
#
# Environment (all optional):
#   ROUNDS=3              alternating wrk rounds per scrape setting
#   SCRAPE_SECONDS=8      length of each wrk run
#   SCRAPES=10000         scrapes before the exporter RSS reading
#   DETECT_TRIALS=5       watchdog crossings per interval (default 5s and 1s)
#   PROM_TRIALS=3         Prometheus-path crossings (each takes 1-2 minutes)
#   WEBHOOK_SECONDS=8     length of each webhook load run
#   FOOTPRINT_SECONDS=600 idle-serve window
#   RUNLOG_SECONDS=5      length of each run-log writer run
#   BENCH_COUNT=6         -count for the Go benchmarks (benchstat wants >= 6)
#   BENCH_OUT=dir         keep the Go benchmark output there (default: temp dir)
#   NO_INSTALL=1          only check for the Debian packages, never apt-get them
#   PRESSURE_SECONDS=150  longest the thrash may last (at most 180)
#   PRESSURE_SWAP_DIR=/var/tmp  where the swap file goes (a disk filesystem:
#                         swapon refuses tmpfs and overlayfs)
#   PRESSURE_LAVENDER_ARGS=  extra arguments for the thrash's lavender serve,
#                         e.g. --runtime.gomaxprocs=2
#
# Every server binds 127.0.0.1 on a free port; lavbench (bench/cmd/lavbench)
# starts and kills the children, and the trap below kills whatever is left.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)

ROUNDS=${ROUNDS:-3}
SCRAPE_SECONDS=${SCRAPE_SECONDS:-8}
SCRAPES=${SCRAPES:-10000}
DETECT_TRIALS=${DETECT_TRIALS:-5}
PROM_TRIALS=${PROM_TRIALS:-3}
WEBHOOK_SECONDS=${WEBHOOK_SECONDS:-8}
FOOTPRINT_SECONDS=${FOOTPRINT_SECONDS:-600}
RUNLOG_SECONDS=${RUNLOG_SECONDS:-5}
BENCH_COUNT=${BENCH_COUNT:-6}
PRESSURE_SECONDS=${PRESSURE_SECONDS:-150}
PRESSURE_SWAP_DIR=${PRESSURE_SWAP_DIR:-/var/tmp}
PRESSURE_LAVENDER_ARGS=${PRESSURE_LAVENDER_ARGS:-}
# Named after this shell, so the trap can undo them if lavbench is killed.
pressure_swap=$PRESSURE_SWAP_DIR/lavender-bench-pressure.$$.swap
pressure_cgroup=lavender-bench-pressure-$$

work=$(mktemp -d "${TMPDIR:-/tmp}/lavender-bench.XXXXXX")
cleanup() {
	# lavbench kills its own children; this catches anything left if it
	# was itself killed (its children also die with it through Pdeathsig).
	local pids
	pids=$(jobs -p || true)
	if [[ -n $pids ]]; then kill $pids 2>/dev/null || true; fi
	rm -rf "$work"
	undo_pressure
}
# undo_pressure removes the pressure section's cgroup and swap file if a
# killed lavbench left them; lavbench removes them itself otherwise. The
# cgroup only ever holds lavbench's children.
undo_pressure() {
	local cg pid
	for cg in "/sys/fs/cgroup/$pressure_cgroup" "/sys/fs/cgroup/memory/$pressure_cgroup"; do
		[[ -d $cg ]] || continue
		for pid in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
		for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2>/dev/null && break; sleep 0.5; done
	done
	if [[ -e $pressure_swap ]]; then
		swapoff "$pressure_swap" 2>/dev/null || true
		rm -f "$pressure_swap"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sections=("$@")
if [[ ${#sections[@]} -eq 0 ]]; then
	sections=(scrape detect detect-prom webhook bigwebhook serve-rss footprint runlog gobench)
fi
want() {
	local s
	for s in "${sections[@]}"; do [[ $s == "$1" ]] && return 0; done
	return 1
}

say() { printf '\n%s\n' "$*" >&2; }

# --- deps ---------------------------------------------------------------
need_pkg() { # binary package
	if command -v "$1" >/dev/null; then return; fi
	if [[ -n ${NO_INSTALL:-} ]]; then
		echo "missing $1: apt-get install $2" >&2
		exit 1
	fi
	say "installing $2"
	local sudo=
	[[ $(id -u) -eq 0 ]] || sudo=sudo
	if ! apt-cache show "$2" >/dev/null 2>&1; then $sudo apt-get update -q; fi
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$2" >&2
}
need_pkg wrk wrk
need_pkg prometheus-node-exporter prometheus-node-exporter
if want detect-prom; then
	need_pkg prometheus prometheus
	need_pkg prometheus-alertmanager prometheus-alertmanager
fi
command -v go >/dev/null || { echo "go not found" >&2; exit 1; }

say "building lavender and lavbench into $work"
go build -o "$work/lavender" ./cmd/lavender
go build -o "$work/lavbench" ./bench/cmd/lavbench
lav=$work/lavender
lb=$work/lavbench

# --- machine notes ------------------------------------------------------
echo "# lavender benchmarks, $(date -u +%F)"
echo
echo "- CPU: $(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "- memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), swap: $(awk '/SwapTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "- kernel: $(uname -r)"
echo "- $(go version)"
echo "- lavender: $("$lav" version 2>&1 | head -1)"
echo "- node_exporter: $(prometheus-node-exporter --version 2>&1 | head -1)"
echo "- wrk: $(wrk -v 2>&1 | head -1)"
if want detect-prom; then
	echo "- $(prometheus --version 2>&1 | head -1)"
	echo "- $(prometheus-alertmanager --version 2>&1 | head -1)"
fi
echo

# --- sections -----------------------------------------------------------
if want scrape; then
	say "scrape: lavender exporter vs node_exporter (~$((ROUNDS * 8 * SCRAPE_SECONDS + 60)) s)"
	"$lb" scrape -lavender "$lav" -rounds "$ROUNDS" -seconds "$SCRAPE_SECONDS" -scrapes "$SCRAPES"
fi

if want detect; then
	say "detect: watchdog at its default interval, then at 1s"
	"$lb" detect -lavender "$lav" -interval 0 -trials "$DETECT_TRIALS"
	"$lb" detect -lavender "$lav" -interval 1s -trials "$((DETECT_TRIALS * 2))"
fi

if want detect-prom; then
	say "detect-prom: $PROM_TRIALS trials of 1-2 minutes each"
	"$lb" detect-prom -lavender "$lav" -repo "$repo" -trials "$PROM_TRIALS"
fi

if want webhook; then
	say "webhook: 1 target, 3 targets, 3 targets with one hanging"
	"$lb" webhook -lavender "$lav" -targets 1 -conns 1,8 -seconds "$WEBHOOK_SECONDS"
	"$lb" webhook -lavender "$lav" -targets 3 -conns 1,8 -seconds "$WEBHOOK_SECONDS"
	# Each answer waits the full --bark.timeout for the hanging target, so
	# run longer with more clients to collect a few dozen answers.
	"$lb" webhook -lavender "$lav" -targets 2 -hang -conns 1,8 -seconds "$((WEBHOOK_SECONDS + 12))"
fi

if want bigwebhook; then
	say "bigwebhook: 12,000 alerts per body, once and 4 at once, 5 Bark targets down / answering 500 / hanging"
	for mode in down 500 hang; do
		"$lb" bigwebhook -lavender "$lav" -bark "$mode"
	done
fi

if want serve-rss; then
	# The defaults are --runtime.gomaxprocs=1 and --runtime.gogc=75; the
	# variants show what each buys (Go's own defaults: all CPUs, GOGC=100).
	say "serve-rss: 10,000 scrapes + 1,000 webhooks: lavender's defaults, GOGC=100, GOGC=50, GOMAXPROCS=0 (GOMEMLIMIT=8MiB thrashes: several minutes)"
	"$lb" serve-rss -lavender "$lav" -envs ";GOGC=100;GOGC=50;LAVENDER_RUNTIME_GOMAXPROCS=0"
fi

if want footprint; then
	say "footprint: idle serve for $FOOTPRINT_SECONDS s"
	"$lb" footprint -lavender "$lav" -seconds "$FOOTPRINT_SECONDS"
fi

if want pressure; then
	say "pressure: a real thrash in a memory cgroup (at most $PRESSURE_SECONDS s)"
	"$lb" pressure -lavender "$lav" -node-exporter "$(command -v prometheus-node-exporter)" \
		-swap-file "$pressure_swap" -cgroup "$pressure_cgroup" -seconds "$PRESSURE_SECONDS" \
		-lavender-args "$PRESSURE_LAVENDER_ARGS"
fi

if want runlog; then
	say "runlog: one writer process, then two"
	"$lb" runlog -lavender "$lav" -writers 1,2 -seconds "$RUNLOG_SECONDS"
fi

if want gobench; then
	out=${BENCH_OUT:-$work/gobench}
	mkdir -p "$out"
	say "go test -bench, -count $BENCH_COUNT, output in $out"
	go test -run '^$' -bench . -benchmem -count "$BENCH_COUNT" \
		./exporter/ ./phaseserver/ ./delivery/ ./webhook/ ./runlog/ ./cmd/lavender/ >"$out/bench.txt"
	benchstat=$(command -v benchstat || true)
	if [[ -z $benchstat ]]; then
		GOBIN=$work/gobin go install golang.org/x/perf/cmd/benchstat@latest
		benchstat=$work/gobin/benchstat
	fi
	echo "## Go benchmarks (benchstat of $BENCH_COUNT runs)"
	echo
	echo '```'
	"$benchstat" "$out/bench.txt"
	echo '```'
fi
