package metrics

import (
	"github.com/pinpool/pinpool/transfer"
	"github.com/prometheus/client_golang/prometheus"
)

// CopierStats is what WithCopier reads: a *transfer.Copier.
type CopierStats interface {
	Stats() transfer.Stats
}

// WithCopier adds the statistics of a transfer engine (a *transfer.Copier
// working over the collector's pool), read at scrape time with the
// collector's labels:
//
//	pinpool_transfers_total{direction, path}          transfers that finished without error
//	pinpool_transfer_bytes_total{direction, path}     bytes they moved
//	pinpool_transfer_seconds_total{direction, path}   their wall time
//	pinpool_transfer_failures_total                   transfers that failed (not by cancellation)
//	pinpool_transfer_canceled_total                   transfers cut short by their context
//	pinpool_transfer_staging_chunks_total             staging chunks issued
//	pinpool_transfer_staging_waits_total              chunks that waited for a window slot
//	pinpool_transfer_staging_wait_seconds_total       time spent waiting
//	pinpool_transfer_staging_bytes                    staging memory held now
//	pinpool_transfer_staging_peak_bytes               the most held at once
//	pinpool_transfer_staging_window_bytes             the window's bound
//
// direction is "H2D" or "D2H"; path is "direct", "staged", "pinned",
// "registered" or "stream" (a stream or file transfer, one per call). rate(pinpool_transfer_bytes_total) over
// rate(pinpool_transfer_seconds_total) of one path is the mean speed of one
// transfer (transfers that run at once overlap); rate(..._seconds_total)
// over rate(pinpool_transfers_total) is the mean duration. There is no
// histogram of transfer durations, for the reason given in the package
// documentation: transfer.Stats holds totals, not events. Stats.Last (the
// last transfer) is not exported: a sample of one event per scrape is not
// a series that aggregates.
func WithCopier(c CopierStats) Option {
	return func(cfg *config) { cfg.copier = c }
}

// copierMetrics are the descriptors of WithCopier's metrics.
type copierMetrics struct {
	c                         CopierStats
	transfers, bytes, seconds *prometheus.Desc
	scalars                   []copierScalar
}

type copierScalar struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	get  func(*transfer.Stats) float64
}

func newCopierMetrics(c CopierStats, desc func(name, help string, variable ...string) *prometheus.Desc) *copierMetrics {
	m := &copierMetrics{
		c:         c,
		transfers: desc("transfers_total", "Transfers that finished without error, by direction and path.", "direction", "path"),
		bytes:     desc("transfer_bytes_total", "Bytes moved by transfers that finished without error, by direction and path.", "direction", "path"),
		seconds:   desc("transfer_seconds_total", "Wall time of transfers that finished without error, by direction and path.", "direction", "path"),
	}
	add := func(kind prometheus.ValueType, name, help string, get func(*transfer.Stats) float64) {
		m.scalars = append(m.scalars, copierScalar{desc(name, help), kind, get})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	add(counter, "transfer_staging_chunks_total", "Staging chunks issued.",
		func(s *transfer.Stats) float64 { return float64(s.Chunks) })
	add(counter, "transfer_staging_waits_total", "Staging chunks that waited for a window slot.",
		func(s *transfer.Stats) float64 { return float64(s.StagingWaits) })
	add(counter, "transfer_staging_wait_seconds_total", "Time spent waiting for a staging window slot.",
		func(s *transfer.Stats) float64 { return s.StagingWaitTime.Seconds() })
	add(gauge, "transfer_staging_bytes", "Pinned staging memory held now.",
		func(s *transfer.Stats) float64 { return float64(s.StagingBytes) })
	add(gauge, "transfer_staging_peak_bytes", "The most pinned staging memory held at once.",
		func(s *transfer.Stats) float64 { return float64(s.PeakStaging) })
	add(gauge, "transfer_staging_window_bytes", "The bound on staging memory per direction (Options.WindowBytes, whole chunks); transfers both ways at once may hold twice it.",
		func(s *transfer.Stats) float64 { return float64(s.WindowBytes) })
	add(counter, "transfer_failures_total", "Transfers that returned an error other than cancellation.",
		func(s *transfer.Stats) float64 { return float64(s.Failed) })
	add(counter, "transfer_canceled_total", "Transfers cut short by their context.",
		func(s *transfer.Stats) float64 { return float64(s.Canceled) })
	return m
}

func (m *copierMetrics) describe(ch chan<- *prometheus.Desc) {
	ch <- m.transfers
	ch <- m.bytes
	ch <- m.seconds
	for _, s := range m.scalars {
		ch <- s.desc
	}
}

// collect takes one snapshot of the copier's stats and sends every metric.
func (m *copierMetrics) collect(send func(*prometheus.Desc, prometheus.ValueType, float64, ...string)) {
	st := m.c.Stats()
	for _, d := range []struct {
		name string
		s    transfer.DirectionStats
	}{{transfer.HostToDevice.String(), st.ToDevice}, {transfer.DeviceToHost.String(), st.FromDevice}} {
		for _, p := range []struct {
			path transfer.Path
			s    transfer.PathStats
		}{{transfer.PathDirect, d.s.Direct}, {transfer.PathStaged, d.s.Staged}, {transfer.PathPinned, d.s.Pinned}, {transfer.PathRegistered, d.s.Registered}, {transfer.PathStream, d.s.Stream}} {
			path := p.path.String()
			send(m.transfers, prometheus.CounterValue, float64(p.s.Transfers), d.name, path)
			send(m.bytes, prometheus.CounterValue, float64(p.s.Bytes), d.name, path)
			send(m.seconds, prometheus.CounterValue, p.s.Time.Seconds(), d.name, path)
		}
	}
	for _, s := range m.scalars {
		send(s.desc, s.kind, s.get(&st))
	}
}
