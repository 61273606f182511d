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
// Every metric carries the label backend (the backend's Name, such as
// "host(mlock)" or "cuda:0/register") and, with WithPool, the label pool.
// Byte figures count buffer capacities, as Stats does. Names follow
// Prometheus' conventions: base units (bytes, seconds) at the end of the
// name, or just before _total on counters, and a label rather than one name
// per state.
//
// Gauges:
//
//	pinpool_memory_bytes{state}    state="held": allocated from the backend, the sum of
//	                               "in_use" (handed out), "idle" (ready to hand out),
//	                               "pending" (released with a fence not yet complete) and
//	                               "retired" (after a fence error)
//	pinpool_memory_peak_bytes      the most memory held at once since the pool was made
//	pinpool_budget_bytes           Options.Budget; 0 means no budget
//	pinpool_lock_limit_bytes       what RLIMIT_MEMLOCK let the backend lock at New; 0 means no limit
//	pinpool_huge_page_bytes        held memory that huge pages backed when allocated
//	pinpool_size_classes           size classes of the pool
//	pinpool_class_buffers{size, state="in_use"|"idle"|"pending"|"retired"}
//	                               buffers of each size class, by state
//
// Since state="held" is the sum of the other states, add the states up
// with pinpool_memory_bytes{state!="held"}, not over every state.
//
// Counters:
//
//	pinpool_gets_total, pinpool_hits_total, pinpool_misses_total
//	pinpool_grows_total, pinpool_grown_bytes_total
//	pinpool_grow_failures_total (failed backend allocations), pinpool_free_failures_total
//	pinpool_backend_panics_total
//	pinpool_trims_total, pinpool_trimmed_bytes_total
//	pinpool_released_after_fence_total, pinpool_fence_errors_total
//	pinpool_budget_waits_total, pinpool_budget_refusals_total (budget or lock limit)
//	pinpool_low_memory_refusals_total
//	pinpool_pin_splits_total (pin calls retried in smaller parts)
//	pinpool_class_gets_total{size}, pinpool_class_misses_total{size}, pinpool_class_grows_total{size}
//
// Histograms (one observation per event, bounds pinpool.DurationBounds,
// from 10 µs to 10 s by factors of ten):
//
//	pinpool_grow_duration_seconds          the time of each backend allocation
//	pinpool_budget_wait_duration_seconds   how long each Get that waited for room waited
//
// The pool records each event as it happens (Stats.GrowTimes and
// Stats.BudgetWaitTimes), so the buckets count allocations and waits, not
// averages between scrapes. There is no gauge of the slowest allocation so
// far: a maximum since start never comes down, so it cannot be taken over
// a window; the histogram's top buckets say the same per window. The
// transfer engine's statistics are totals only (see WithCopier), so they
// have no histogram yet.
//
// # Size classes
//
// The size label is a class's buffer capacity in bytes ("3112960"). With
// Options.Exact every distinct request size is a class, so the label would
// be unbounded; the collector exports the per-class series of at most
// WithClassLimit classes (32 by default), those that hold the most bytes,
// and sums the others under size="other". The counters of size="other" are
// kept by the collector and only go up; a class that moves into the top
// classes starts its own series at its total, so while classes move in and
// out, the sum of a class counter over every size can exceed the pool-wide
// counter; use rate() on it.
//
// # Several pools in one registry
//
// WithPool(name) adds the constant label pool=name. Collectors with
// different names register in one registry and are scraped together; two
// with the same name, or two without a name, are the same collector to the
// registry (whatever their backends) and the second Register fails with a
// prometheus.AlreadyRegisteredError (or, when their options differ, with
// an error that a descriptor already exists). A registry wants the same
// label names on every series of a metric, so a named pool cannot join an
// unnamed one either: with several pools in one registry, name them all.
//
// # Other components
//
// WithCopier adds the transfer engine's statistics (a *transfer.Copier)
// under pinpool_transfer_*. WithGaugeFunc and WithCounterFunc add metrics
// read from a function at scrape time, under the same prefix and labels,
// for anything else; a counter's name must end in _total.
package metrics
