// Command tracetimeline reads a Go execution trace of the transfer
// package's BenchmarkStagedTrace (-test.trace) and prints, for the fourth
// transfer of each benchmark leaf (the log event "leaf" names a leaf, the
// region "transfer" marks a transfer), every goroutine state change and
// log event of the process during that transfer, in µs from its start:
//
//	tracetimeline TRACE [LEAF-SUBSTRING]
//
// It is a module of its own, so that pinpool does not depend on
// golang.org/x/exp. docs/results/2026-12-01-spin.md shows what it told.
package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"

	"golang.org/x/exp/trace"
)

type rec struct {
	t    trace.Time
	g    trace.GoID
	p    trace.ProcID
	text string
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tracetimeline TRACE [LEAF-SUBSTRING]")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	r, err := trace.NewReader(f)
	if err != nil {
		log.Fatal(err)
	}
	want := ""
	if len(os.Args) > 2 {
		want = os.Args[2]
	}
	leaf := ""
	var cur []rec
	var regionG trace.GoID = -1
	var start trace.Time
	last := map[string][]rec{}
	count := map[string]int{}
	var order []string
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Kind() {
		case trace.EventLog:
			l := ev.Log()
			if l.Category == "leaf" {
				leaf = l.Message
				if _, ok := last[leaf]; !ok {
					order = append(order, leaf)
				}
				continue
			}
			if regionG >= 0 {
				cur = append(cur, rec{ev.Time(), ev.Goroutine(), ev.Proc(), "log " + l.Category + " " + l.Message})
			}
		case trace.EventRegionBegin:
			if ev.Region().Type == "transfer" {
				regionG, start = ev.Goroutine(), ev.Time()
				cur = cur[:0]
			}
		case trace.EventRegionEnd:
			if ev.Region().Type == "transfer" && ev.Goroutine() == regionG {
				cur = append(cur, rec{ev.Time(), ev.Goroutine(), ev.Proc(), "END"})
				for i := range cur {
					cur[i].t -= start
				}
				count[leaf]++
				if count[leaf]%4 == 0 { // the fourth (warm) transfer of an iteration
					last[leaf] = append([]rec(nil), cur...)
				}
				regionG = -1
			}
		case trace.EventStateTransition:
			if regionG < 0 {
				continue
			}
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			from, to := st.Goroutine()
			g := st.Resource.Goroutine()
			cur = append(cur, rec{ev.Time(), g, ev.Proc(), fmt.Sprintf("%v->%v %s", from, to, st.Reason)})
		}
	}
	for _, l := range order {
		if want != "" && !strings.Contains(l, want) {
			continue
		}
		rs := last[l]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].t < rs[j].t })
		fmt.Printf("== %s (%d transfers)\n", l, count[l])
		for _, x := range rs {
			fmt.Printf("%8.1f g%-4d p%-3d %s\n", float64(x.t)/1e3, x.g, x.p, x.text)
		}
	}
}
