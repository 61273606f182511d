// Package metrics exposes a pinpool.Pool's statistics to Prometheus.
//
// NewCollector returns a prometheus.Collector that reads Pool.Stats when it
// is scraped (nothing is counted on the pool's hot path). Register it in a
// registry of your own; this package never touches the global default
// registry:
//
//	reg := prometheus.NewRegistry()
//	if err := metrics.Register(reg, pool, metrics.WithPool("frames")); err != nil { ... }
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Metrics
//
// Every metric carries the constant label backend (the backend's Name, such
// as "host(mlock)" or "cuda:0/register") and, with WithPool, the label pool.
// Byte figures count buffer capacities, as Stats does.
//
// Gauges:
//
//	pinpool_bytes_held          allocated from the backend (in use + idle + pending + retired)
//	pinpool_bytes_in_use        handed out and not released
//	pinpool_bytes_idle          ready to hand out
//	pinpool_bytes_pending       released with a fence that has not completed
//	pinpool_bytes_retired       retired after a fence error
//	pinpool_bytes_peak_held     highest pinpool_bytes_held so far
//	pinpool_budget_bytes        Options.Budget; 0 means no budget
//	pinpool_grow_max_seconds    the slowest backend allocation so far
//	pinpool_class_buffers{size, state="in_use"|"idle"|"pending"}
//	                            buffers of each size class, by state
//
// Counters:
//
//	pinpool_gets_total, pinpool_hits_total, pinpool_misses_total
//	pinpool_grows_total, pinpool_grown_bytes_total, pinpool_grow_seconds_total
//	pinpool_trims_total, pinpool_trimmed_bytes_total
//	pinpool_released_after_fence_total, pinpool_fence_errors_total
//	pinpool_failures_total (failed backend allocations)
//	pinpool_budget_waits_total, pinpool_budget_refusals_total
//	pinpool_low_memory_refusals_total
//	pinpool_class_gets_total{size}, pinpool_class_misses_total{size}
//
// The size label is a class's buffer capacity in bytes ("3112960").
//
// # Other components
//
// WithGaugeFunc and WithCounterFunc add metrics that are read from a
// function at scrape time, under the same prefix and labels. They are the
// hook for the transfer engine's statistics (bytes staged, copies, ...):
// a caller passes, for each figure of the copier's stats, a function that
// reads it, so that this package needs no import of package transfer.
package metrics
