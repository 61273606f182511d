#!/usr/bin/env bash
# Issue 35 on the GPU host: a large pinned arena (32 and 96 GiB by default)
# made by the new code (`pinpool arena`: the pool's defaults as 2 MiB
# blocks, 1 GiB blocks and one buffer, the Register backend on normal
# pages, the HostAlloc backend, one cuMemHostAlloc, and the growth knobs at
# the first size), by the code of revision $OLD (default 5efbe3c, through
# the public API it already had), and by PyTorch's two ways, while a
# neighbour process copies 64 KiB from pinned memory to the device every
# 200 us on its own stream and calls cuMemGetInfo every 2 ms. Each Go way
# also times an in-process neighbour goroutine doing the same copies.
#
#   on a development machine: bash scripts/gpu-arena.sh build   (fills .gpu/arena; pure Go)
#   on the GPU host:          bash scripts/gpu-arena.sh run OUT [GiB ...]
#   (SWEEP=0 leaves out the growth knobs and the raw cuMemHostAlloc of the first size)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.gpu/arena
case "${1:-}" in
build)
	set -e
	OLD=${OLD:-5efbe3c}
	mkdir -p "$bin"
	CGO_ENABLED=0 go build -ldflags='-s -w' -o "$bin/pinpool" ./cmd/pinpool
	tmp=$(mktemp -d)
	git archive "$OLD" | tar -x -C "$tmp"
	mkdir -p "$tmp/cmd/oldprobe"
	sed -n '/^\/\/ BEGIN oldprobe/,/^\/\/ END oldprobe/p' "$0" | sed '1d;$d' >"$tmp/cmd/oldprobe/main.go"
	(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -ldflags='-s -w' -o oldprobe ./cmd/oldprobe)
	mv "$tmp/oldprobe" "$bin/oldprobe-$OLD"
	rm -rf "$tmp"
	cp scripts/ref/torch_pin.py "$bin/"
	ls -la "$bin"
	exit 0
	;;
run) ;;
*)
	echo "usage: gpu-arena.sh build | run OUT [GiB ...]" >&2
	exit 2
	;;
esac
OUT=${2:?usage: gpu-arena.sh run OUT [GiB ...]}
shift 2
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(32 96)
mkdir -p "$OUT"
LOG=$OUT/arena.log
J=$OUT/arena.jsonl
: >"$J"
log() { echo "[$SECONDS s] $*" | tee -a "$LOG" >&2; }
run() { log "$*"; timeout -k 5 "${LIMIT:-300}" "$@" >>"$J" 2>>"$LOG" || log "exit $?: $*"; }
{
	uname -a; nproc; free -g; grep -iE 'huge|MemAvail' /proc/meminfo
	for f in enabled defrag; do echo "thp $f: $(cat /sys/kernel/mm/transparent_hugepage/$f 2>/dev/null)"; done
	nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | head -3
	python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1
	ls "$bin"
} >>"$LOG" 2>&1
old=$(ls "$bin"/oldprobe-* | head -1)
NB=/tmp/arena-nb.$$.json
python3 "$bin/torch_pin.py" neighbour "$NB" >/tmp/arena-nb.$$.out 2>>"$LOG" &
nbpid=$!
for _ in $(seq 1 60); do grep -q ready /tmp/arena-nb.$$.out 2>/dev/null && break; kill -0 $nbpid 2>/dev/null || break; sleep 0.5; done
# The first large allocation on a fresh machine runs slower: one round first.
run "$bin/pinpool" arena --json --progress never --sizes 8GiB --ways pool
first=1
for g in "${sizes[@]}"; do
	run "$old" -tag "${old##*-}" -gib "$g" pool:blocks=2MiB pool pool+register:blocks=2MiB pool+register
	run "$bin/pinpool" arena --json --progress never --sizes "${g}GiB" \
		--ways pool:blocks=2MiB,pool:blocks=1GiB,pool,pool+register+small:blocks=2MiB,pool+register+small
	run python3 "$bin/torch_pin.py" pin "$g" register
	if [ $first = 1 ]; then
		[ "${SWEEP:-1}" = 1 ] && run "$bin/pinpool" arena --json --progress never --sizes "${g}GiB" \
			--ways register:piece=16MiB,register:piece=32MiB,register:piece=64MiB,register:pause=off,register:pause=100us,register:pause=500us,register:prefault=16,register:regw=1
		run "$bin/pinpool" arena --json --progress never --sizes 4GiB --ways pool+hostalloc:blocks=2MiB,hostalloc:alloc=2MiB:pause=off,hostalloc:alloc=4MiB
		run "$old" -tag "${old##*-}" -gib 4 pool+hostalloc:blocks=2MiB
		run python3 "$bin/torch_pin.py" pin "$g"
		[ "${SWEEP:-1}" = 1 ] && run "$bin/pinpool" arena --json --progress never --sizes "${g}GiB" --ways hostalloc-raw
	fi
	first=0
done
kill -TERM $nbpid 2>/dev/null
for _ in $(seq 1 60); do kill -0 $nbpid 2>/dev/null || break; sleep 0.5; done
python3 "$bin/torch_pin.py" split "$NB" "$J" >"$OUT/arena-nb.jsonl" 2>>"$LOG"
rm -f "$NB" /tmp/arena-nb.$$.out
python3 - "$J" "$OUT/arena-nb.jsonl" <<'PY' | tee -a "$LOG"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ext = {}
for l in open(sys.argv[2]):
    if l.startswith("{"):
        r = json.loads(l); ext[(r["way"], r["bytes"])] = r
def ms(ns): return "-" if ns is None else "%.2f" % (ns / 1e6)
def lat(l): return "-" if not l else "%s/%s/%s" % (ms(l.get("p50_ns")), ms(l.get("p99_ns")), ms(l.get("max_ns")))
print("%-42s %4s %6s %6s %-22s %-22s %-8s %s" % ("way", "GiB", "GB/s", "close", "goroutine nb p50/p99/max ms", "", "meminfo", "error"))
print("%-42s %4s %6s %6s %-22s %-22s %-8s" % ("", "", "", "s", "grow", "close", "max ms"))
for r in rows:
    e = ext.get((r["way"], r["bytes"]), {})
    mi = e.get("grow_meminfo") or {}
    print("%-42s %4.0f %6.1f %6.2f %-22s %-22s %-8s %s" % (r["way"][:42], r["bytes"] / 2**30, r.get("gb_per_s", 0), r.get("close_ns", 0) / 1e9,
          lat(r.get("neighbour")), lat(r.get("neighbour_close")), ms(mi.get("max_ns")), (r.get("error") or "")[:50]))
PY
log done
exit 0

# The probe of the old revision (copied into its checkout by build).
: <<'OLDPROBE'
// BEGIN oldprobe
// Command oldprobe measures a large pinned arena through the public API
// that pinpool has had since before its arena growth (pinpool.New,
// Reserve, Close; cudahost.New; cuda.HostAlloc), so that it builds against
// an older revision and measures it beside `pinpool arena` of the new one:
// scripts/gpu-arena.sh copies it into a checkout of that revision. One
// JSON line per way, in the fields of `pinpool arena --json`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"golang.org/x/sys/unix"
)

func mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

type lat struct {
	Count int   `json:"count"`
	P50   int64 `json:"p50_ns"`
	P99   int64 `json:"p99_ns"`
	Max   int64 `json:"max_ns"`
}

func summary(l []time.Duration) *lat {
	if len(l) == 0 {
		return &lat{}
	}
	slices.Sort(l)
	q := func(f float64) int64 { return int64(l[int(f*float64(len(l)-1))]) }
	return &lat{len(l), q(0.5), q(0.99), int64(l[len(l)-1])}
}

// neighbour copies 64 KiB to the device every 200 µs on its own stream.
func neighbour(ctx *cuda.Context, stop chan struct{}, mu *sync.Mutex, out *[]time.Duration) *sync.WaitGroup {
	host, _ := ctx.HostAlloc(64<<10, 0)
	dev, _ := ctx.MemAlloc(64 << 10)
	s, _ := ctx.NewStream(cuda.StreamNonBlocking)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				s.Destroy()
				dev.Free()
				host.Free()
				return
			case <-t.C:
			}
			t0 := time.Now()
			if s.CopyHtoDAsync(dev.Ptr(), host.Bytes()) == nil {
				s.Synchronize()
			}
			mu.Lock()
			*out = append(*out, time.Since(t0))
			mu.Unlock()
		}
	})
	return &wg
}

func main() {
	gib := flag.Float64("gib", 32, "arena size in GiB")
	tag := flag.String("tag", "old", "label")
	flag.Parse()
	ctx, err := cuda.NewContext(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	total := int64(*gib * (1 << 30))
	for _, way := range flag.Args() {
		var mu sync.Mutex
		var l []time.Duration
		stop := make(chan struct{})
		wg := neighbour(ctx, stop, &mu, &l)
		take := func() []time.Duration { mu.Lock(); defer mu.Unlock(); r := l; l = nil; return r }
		res := map[string]any{"way": *tag + " " + way, "bytes": total, "start_mono_ns": mono()}
		t0 := time.Now()
		var free func() error
		switch way {
		case "hostalloc-raw":
			m, err := ctx.HostAlloc(int(total), 0)
			if err != nil {
				res["error"] = err.Error()
			} else {
				free = m.Free
			}
		default: // pool[+register|+hostalloc][:blocks=2MiB]
			o := pinpool.Options{}
			switch {
			case len(way) >= 13 && way[:13] == "pool+register":
				b, err := cudahost.New(cudahost.Options{Method: cudahost.Register})
				if err != nil {
					panic(err)
				}
				o.Backend = pinpool.CUDABackend(b)
			case len(way) >= 14 && way[:14] == "pool+hostalloc":
				b, err := cudahost.New(cudahost.Options{Method: cudahost.HostAlloc})
				if err != nil {
					panic(err)
				}
				o.Backend = pinpool.CUDABackend(b)
			}
			p, err := pinpool.New(o)
			if err != nil {
				panic(err)
			}
			n, count := total, 1
			if len(way) > 12 && way[len(way)-12:] == ":blocks=2MiB" {
				n, count = 2<<20, int(total/(2<<20))
			}
			if err := p.Reserve(int(n), count); err != nil {
				res["error"] = err.Error()
			}
			free = p.Close
		}
		took := time.Since(t0)
		res["made_mono_ns"], res["took_ns"] = mono(), took.Nanoseconds()
		res["gb_per_s"] = float64(total) / took.Seconds() / 1e9
		res["neighbour"] = summary(take())
		if free != nil {
			t1 := time.Now()
			free()
			res["close_ns"] = time.Since(t1).Nanoseconds()
		}
		res["freed_mono_ns"] = mono()
		res["neighbour_close"] = summary(take())
		close(stop)
		wg.Wait()
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	}
}
// END oldprobe
OLDPROBE
