package metrics_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A pool's statistics in a Prometheus registry of one's own, read when it
// is scraped. It runs with or without a GPU.
func ExampleRegister() {
	p, err := pinpool.New(pinpool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p, metrics.WithPool("frames")); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) // serve it with http.ListenAndServe

	for range 2 {
		buf, err := p.Get(context.Background(), 16<<10) // small: fits a 64 KiB lock limit
		if err != nil {
			log.Fatal(err)
		}
		buf.Release()
	}
	families, err := reg.Gather() // what a scrape reads
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "pinpool_gets_total", "pinpool_misses_total":
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// pinpool_gets_total 2
	// pinpool_misses_total 1
}

// Figures of other components join the pool's, under the same prefix and
// labels, read at scrape time.
func ExampleWithGaugeFunc() {
	p, err := pinpool.New(pinpool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	queued := 3 // frames waiting for the encoder, say
	reg := prometheus.NewRegistry()
	err = metrics.Register(reg, p, metrics.WithGaugeFunc("frames_queued", "Frames waiting for the encoder.",
		func() float64 { return float64(queued) }))
	if err != nil {
		log.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "pinpool_frames_queued" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output: pinpool_frames_queued 3
}
