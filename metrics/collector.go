package metrics

import (
	"fmt"
	"strconv"

	"github.com/pinpool/pinpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace is the prefix of every metric name: pinpool_bytes_held, ...
const Namespace = "pinpool"

// Option configures a Collector.
type Option func(*config)

type config struct {
	pool   string
	funcs  []funcMetric
	copier CopierStats
}

// funcMetric is a metric added with WithGaugeFunc or WithCounterFunc.
type funcMetric struct {
	name, help string
	kind       prometheus.ValueType
	read       func() float64
}

// WithPool adds the constant label pool=name to every metric, so that
// several pools can be registered in one registry (each with its own name).
// An empty name adds no label.
func WithPool(name string) Option {
	return func(c *config) { c.pool = name }
}

// WithGaugeFunc adds the gauge pinpool_<name>, whose value read returns at
// scrape time, with the collector's labels. It is the hook for statistics of
// other components (the transfer engine has its own option, WithCopier). read must be safe for
// concurrent use and fast; it must not call back into the registry.
func WithGaugeFunc(name, help string, read func() float64) Option {
	return func(c *config) {
		c.funcs = append(c.funcs, funcMetric{name: name, help: help, kind: prometheus.GaugeValue, read: read})
	}
}

// WithCounterFunc is WithGaugeFunc for a counter: read must return a value
// that never decreases, and name should end in _total.
func WithCounterFunc(name, help string, read func() float64) Option {
	return func(c *config) {
		c.funcs = append(c.funcs, funcMetric{name: name, help: help, kind: prometheus.CounterValue, read: read})
	}
}

// scalar is one pool-wide metric: its descriptor, its type and how it is
// read from a Stats snapshot.
type scalar struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	get  func(*pinpool.Stats) float64
}

// Collector is a prometheus.Collector over one pool's Stats. Make it with
// NewCollector. It is safe for concurrent use (concurrent scrapes each take
// their own snapshot).
type Collector struct {
	pool    *pinpool.Pool
	scalars []scalar

	classBuffers, classGets, classMisses *prometheus.Desc

	funcs     []funcMetric
	funcDescs []*prometheus.Desc

	copier *copierMetrics // WithCopier; nil without
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector over p's Stats, read at scrape time. It
// panics if p is nil, or if an option names a metric that is not a valid
// Prometheus name; Register reports both as errors instead.
func NewCollector(p *pinpool.Pool, opts ...Option) *Collector {
	c, err := newCollector(p, opts)
	if err != nil {
		panic(err)
	}
	return c
}

// Register makes a collector over p with NewCollector and registers it in
// reg. Registering a second pool with the same labels (no WithPool, or the
// same name and backend) fails with a prometheus.AlreadyRegisteredError.
func Register(reg prometheus.Registerer, p *pinpool.Pool, opts ...Option) error {
	if reg == nil {
		return fmt.Errorf("metrics: nil Registerer")
	}
	c, err := newCollector(p, opts)
	if err != nil {
		return err
	}
	return reg.Register(c)
}

func newCollector(p *pinpool.Pool, opts []Option) (*Collector, error) {
	if p == nil {
		return nil, fmt.Errorf("metrics: nil pool")
	}
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	labels := prometheus.Labels{"backend": p.Backend().Name()}
	if cfg.pool != "" {
		labels["pool"] = cfg.pool
	}
	c := &Collector{pool: p, funcs: cfg.funcs}
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, variable, labels)
	}
	gauge := func(name, help string, get func(*pinpool.Stats) float64) {
		c.scalars = append(c.scalars, scalar{desc(name, help), prometheus.GaugeValue, get})
	}
	counter := func(name, help string, get func(*pinpool.Stats) float64) {
		c.scalars = append(c.scalars, scalar{desc(name, help), prometheus.CounterValue, get})
	}
	i64 := func(v int64) float64 { return float64(v) }
	u64 := func(v uint64) float64 { return float64(v) }

	gauge("bytes_held", "Bytes allocated from the backend: in use, idle, pending and retired.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesHeld) })
	gauge("bytes_in_use", "Bytes of buffers handed out and not released.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesInUse) })
	gauge("bytes_idle", "Bytes of idle buffers, ready to hand out.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesIdle) })
	gauge("bytes_pending", "Bytes of buffers released with a fence that has not completed.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesPending) })
	gauge("bytes_retired", "Bytes of buffers retired after a fence error, freed with the rest of their allocation.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesRetired) })
	gauge("bytes_peak_held", "Highest pinpool_bytes_held so far.",
		func(s *pinpool.Stats) float64 { return i64(s.PeakHeld) })
	gauge("budget_bytes", "The pool's budget (Options.Budget) in bytes; 0 means no budget.",
		func(s *pinpool.Stats) float64 { return i64(s.Budget) })
	gauge("grow_max_seconds", "Duration of the slowest backend allocation so far.",
		func(s *pinpool.Stats) float64 { return s.MaxGrowTime.Seconds() })

	counter("gets_total", "Get and TryGet calls for a valid size on an open pool.",
		func(s *pinpool.Stats) float64 { return u64(s.Gets) })
	counter("hits_total", "Gets served at once from idle memory.",
		func(s *pinpool.Stats) float64 { return u64(s.Hits) })
	counter("misses_total", "Gets that found no idle buffer and had to grow the pool or wait, served or not.",
		func(s *pinpool.Stats) float64 { return u64(s.Misses) })
	counter("grows_total", "Backend allocations.",
		func(s *pinpool.Stats) float64 { return u64(s.Grows) })
	counter("grown_bytes_total", "Bytes allocated from the backend.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesGrown) })
	counter("grow_seconds_total", "Time spent in backend allocations.",
		func(s *pinpool.Stats) float64 { return s.GrowTime.Seconds() })
	counter("trims_total", "Backend frees by policy, Trim or Close.",
		func(s *pinpool.Stats) float64 { return u64(s.Trims) })
	counter("trimmed_bytes_total", "Bytes given back to the backend.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesTrimmed) })
	counter("released_after_fence_total", "Buffers returned to the pool after their fence completed.",
		func(s *pinpool.Stats) float64 { return u64(s.ReleasedAfterFence) })
	counter("fence_errors_total", "Buffers retired because their fence reported an error or panicked.",
		func(s *pinpool.Stats) float64 { return u64(s.FenceErrors) })
	counter("failures_total", "Failed backend allocations (errors, panics, short or misaligned memory).",
		func(s *pinpool.Stats) float64 { return u64(s.Failures) })
	counter("free_failures_total", "Backend frees that failed or panicked.",
		func(s *pinpool.Stats) float64 { return u64(s.FreeFailures) })
	counter("backend_panics_total", "Panics of the backend, contained by the pool.",
		func(s *pinpool.Stats) float64 { return u64(s.BackendPanics) })
	counter("budget_waits_total", "Get calls that had to wait for room in the budget.",
		func(s *pinpool.Stats) float64 { return u64(s.BudgetWaits) })
	counter("budget_refusals_total", "Growths refused by the budget.",
		func(s *pinpool.Stats) float64 { return u64(s.BudgetRefusals) })
	counter("low_memory_refusals_total", "Growths refused by the system guard (MemAvailable floor).",
		func(s *pinpool.Stats) float64 { return u64(s.LowMemoryRefusals) })

	c.classBuffers = desc("class_buffers", "Buffers of a size class by state; size is the buffer capacity in bytes.", "size", "state")
	c.classGets = desc("class_gets_total", "Gets served by a size class, or failed in it.", "size")
	c.classMisses = desc("class_misses_total", "Gets of a size class that found no idle buffer.", "size")

	for _, f := range cfg.funcs {
		if f.read == nil {
			return nil, fmt.Errorf("metrics: %s: nil read function", f.name)
		}
		fq := prometheus.BuildFQName(Namespace, "", f.name)
		if !validName(fq) {
			return nil, fmt.Errorf("metrics: invalid metric name %q", fq)
		}
		c.funcDescs = append(c.funcDescs, desc(f.name, f.help))
	}
	if cfg.copier != nil {
		c.copier = newCopierMetrics(cfg.copier, desc)
	}
	return c, nil
}

// validName reports whether s is a metric name in the classic character set
// ([a-zA-Z_:][a-zA-Z0-9_:]*), which every exposition format accepts.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r == ':' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.scalars {
		ch <- s.desc
	}
	ch <- c.classBuffers
	ch <- c.classGets
	ch <- c.classMisses
	for _, d := range c.funcDescs {
		ch <- d
	}
	if c.copier != nil {
		c.copier.describe(ch)
	}
}

// Collect implements prometheus.Collector: it takes one Stats snapshot and
// sends every metric from it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	for _, s := range c.scalars {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.get(&st))
	}
	for _, cs := range st.Classes {
		size := strconv.FormatInt(cs.Size, 10)
		ch <- prometheus.MustNewConstMetric(c.classBuffers, prometheus.GaugeValue, float64(cs.InUse), size, "in_use")
		ch <- prometheus.MustNewConstMetric(c.classBuffers, prometheus.GaugeValue, float64(cs.Idle), size, "idle")
		ch <- prometheus.MustNewConstMetric(c.classBuffers, prometheus.GaugeValue, float64(cs.Pending), size, "pending")
		ch <- prometheus.MustNewConstMetric(c.classBuffers, prometheus.GaugeValue, float64(cs.Retired), size, "retired")
		ch <- prometheus.MustNewConstMetric(c.classGets, prometheus.CounterValue, float64(cs.Gets), size)
		ch <- prometheus.MustNewConstMetric(c.classMisses, prometheus.CounterValue, float64(cs.Misses), size)
	}
	for i, f := range c.funcs {
		ch <- prometheus.MustNewConstMetric(c.funcDescs[i], f.kind, f.read())
	}
	if c.copier != nil {
		c.copier.collect(ch)
	}
}
