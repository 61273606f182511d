package metrics

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pinpool/pinpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace is the prefix of every metric name: pinpool_memory_bytes, ...
const Namespace = "pinpool"

// DefaultClassLimit is the number of size classes that get series of their
// own when WithClassLimit is not given.
const DefaultClassLimit = 32

// OtherClass is the size label of the series that aggregate the size
// classes beyond the class limit (see WithClassLimit).
const OtherClass = "other"

// Option configures a Collector.
type Option func(*config)

type config struct {
	pool       string
	funcs      []funcMetric
	copier     CopierStats
	classLimit int
}

// funcMetric is a metric added with WithGaugeFunc or WithCounterFunc.
type funcMetric struct {
	name, help string
	kind       prometheus.ValueType
	read       func() float64
}

// WithPool adds the constant label pool=name to every metric, so that
// several pools can be registered in one registry, each with its own name.
// An empty name adds no label. Two collectors with the same name, or two
// without one, cannot be registered in one registry (whatever their
// backends): the second Register fails with a
// prometheus.AlreadyRegisteredError. Nor can a named pool join an unnamed
// one (the label names would differ): name every pool of a registry.
func WithPool(name string) Option {
	return func(c *config) { c.pool = name }
}

// WithClassLimit bounds the per-class series (the size label) to the n
// size classes that hold the most bytes at the time of the scrape (ties
// go to the smaller size); the other classes are summed under
// size="other". The default is DefaultClassLimit (32). It matters with
// Options.Exact, where every distinct request size is a class and the
// size label would otherwise be unbounded. n == 0 puts every class under
// "other"; a negative n is an error.
//
// The class counters of size="other" are kept by the collector, so they
// never go back when a class moves in or out of the top n; a class that
// enters the top n starts its own series at its total so far.
func WithClassLimit(n int) Option {
	return func(c *config) { c.classLimit = n }
}

// WithGaugeFunc adds the gauge pinpool_<name>, whose value read returns at
// scrape time, with the collector's labels. It is the hook for statistics of
// other components (the transfer engine has its own option, WithCopier).
// read must be safe for concurrent use and fast; it must not call back
// into the registry. name should end in a base unit (_bytes, _seconds)
// where the value has one.
func WithGaugeFunc(name, help string, read func() float64) Option {
	return func(c *config) {
		c.funcs = append(c.funcs, funcMetric{name: name, help: help, kind: prometheus.GaugeValue, read: read})
	}
}

// WithCounterFunc is WithGaugeFunc for a counter: read must return a value
// that never decreases, and name must end in _total (NewCollector and
// Register refuse it otherwise).
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

// classCounters are the counters of one size class, as last scraped, or
// those of size="other".
type classCounters struct{ gets, misses, grows uint64 }

// Collector is a prometheus.Collector over one pool's Stats. Make it with
// NewCollector. It is safe for concurrent use.
type Collector struct {
	pool    *pinpool.Pool
	backend string // the value of the backend label
	scalars []scalar

	memory                   *prometheus.Desc // pinpool_memory_bytes{state}
	classes                  *prometheus.Desc // pinpool_size_classes
	trimsBy                  *prometheus.Desc // pinpool_trims_by_reason_total
	growSeconds, waitSeconds *prometheus.Desc // histograms of growth times and budget waits

	classBuffers, classGets, classMisses, classGrows *prometheus.Desc
	classLimit                                       int

	funcs     []funcMetric
	funcDescs []*prometheus.Desc

	copier *copierMetrics // WithCopier; nil without

	// mu orders scrapes: each takes its Stats snapshot and updates the
	// class state below under it.
	mu       sync.Mutex
	last     map[int64]classCounters // every class's counters at the last scrape
	other    classCounters           // size="other", accumulated
	hasOther bool                    // some scrape had classes beyond the limit
}

var _ prometheus.Collector = (*Collector)(nil)

// backendLabel is the value of the backend label for a backend's Name:
// Prometheus refuses label values that are not valid UTF-8, and one such
// value fails every scrape of the registry, so invalid bytes become U+FFFD.
func backendLabel(name string) string {
	return strings.ToValidUTF8(name, "\uFFFD")
}

// NewCollector returns a collector over p's Stats, read at scrape time. It
// panics if p is nil, or if an option is invalid (a metric name that is not
// a valid Prometheus name, a counter name without _total, a nil read
// function, a negative class limit); Register reports these as errors
// instead.
func NewCollector(p *pinpool.Pool, opts ...Option) *Collector {
	c, err := newCollector(p, opts)
	if err != nil {
		panic(err)
	}
	return c
}

// Register makes a collector over p with NewCollector and registers it in
// reg. Registering a second pool under the same pool label (the same
// WithPool name, or neither named) fails with a
// prometheus.AlreadyRegisteredError: give each pool its own WithPool name.
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
	cfg := config{classLimit: DefaultClassLimit}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.classLimit < 0 {
		return nil, fmt.Errorf("metrics: negative class limit %d", cfg.classLimit)
	}
	if !utf8.ValidString(cfg.pool) {
		return nil, fmt.Errorf("metrics: pool name %q is not valid UTF-8", cfg.pool)
	}
	// The pool name is the only constant label: descriptors, and with them
	// the registry's notion of "the same collector", depend on it alone.
	// backend is a variable label with one value per collector, so that two
	// pools with the same name collide even over different backends.
	var constLabels prometheus.Labels
	if cfg.pool != "" {
		constLabels = prometheus.Labels{"pool": cfg.pool}
	}
	c := &Collector{
		pool:       p,
		backend:    backendLabel(p.Backend().Name()),
		funcs:      cfg.funcs,
		classLimit: cfg.classLimit,
		last:       map[int64]classCounters{},
	}
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help,
			append([]string{"backend"}, variable...), constLabels)
	}
	gauge := func(name, help string, get func(*pinpool.Stats) float64) {
		c.scalars = append(c.scalars, scalar{desc(name, help), prometheus.GaugeValue, get})
	}
	counter := func(name, help string, get func(*pinpool.Stats) float64) {
		c.scalars = append(c.scalars, scalar{desc(name, help), prometheus.CounterValue, get})
	}
	i64 := func(v int64) float64 { return float64(v) }
	u64 := func(v uint64) float64 { return float64(v) }

	c.memory = desc("memory_bytes", `Pinned memory of the pool by state: "held" is all of it (allocated from the backend), the sum of "in_use" (handed out), "idle" (ready to hand out), "pending" (released with a fence that has not completed) and "retired" (after a fence error). Buffer capacities.`, "state")
	gauge("memory_peak_bytes", `The most memory the pool has held at once (pinpool_memory_bytes{state="held"}) since it was made.`,
		func(s *pinpool.Stats) float64 { return i64(s.PeakHeld) })
	gauge("budget_bytes", "The pool's budget (Options.Budget); 0 means no budget.",
		func(s *pinpool.Stats) float64 { return i64(s.Budget) })
	gauge("lock_limit_bytes", "What the backend could lock under RLIMIT_MEMLOCK when the pool was made, kept like a budget; 0 means no limit.",
		func(s *pinpool.Stats) float64 { return i64(s.LockLimit) })
	gauge("huge_page_bytes", "The part of the held memory that huge pages backed when it was allocated, as the backend reports it (Stats.BytesHugePages).",
		func(s *pinpool.Stats) float64 { return i64(s.BytesHugePages) })
	c.growSeconds = desc("grow_duration_seconds", "Time of each backend allocation (pinpool.DurationBounds).")
	c.waitSeconds = desc("budget_wait_duration_seconds", "How long each Get that waited for room in the budget (or the lock limit) waited, served or not.")
	c.trimsBy = desc("trims_by_reason_total", `Backend frees by reason (pinpool.TrimReason): "cap" (room for another size under a budget or limit), "decay" (idle above MaxIdle not needed for the decay time), "idle_timeout", "pressure" (headroom below MinAvailable), "explicit" (Trim), "close", "fence_error", "reserve_failed" (what a failed or cancelled Reserve grew). They add up to pinpool_trims_total.`, "reason")
	c.classes = desc("size_classes", "Size classes of the pool, including those summed under size=\"other\".")

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
	counter("grow_failures_total", "Failed backend allocations (errors, panics, short or misaligned memory).",
		func(s *pinpool.Stats) float64 { return u64(s.Failures) })
	counter("trims_total", "Backend frees by policy, Trim or Close.",
		func(s *pinpool.Stats) float64 { return u64(s.Trims) })
	counter("trimmed_bytes_total", "Bytes given back to the backend.",
		func(s *pinpool.Stats) float64 { return i64(s.BytesTrimmed) })
	counter("free_failures_total", "Backend frees that failed or panicked.",
		func(s *pinpool.Stats) float64 { return u64(s.FreeFailures) })
	counter("backend_panics_total", "Panics of the backend, contained by the pool (also counted as grow or free failures).",
		func(s *pinpool.Stats) float64 { return u64(s.BackendPanics) })
	counter("released_after_fence_total", "Buffers returned to the pool after their fence completed.",
		func(s *pinpool.Stats) float64 { return u64(s.ReleasedAfterFence) })
	counter("fence_errors_total", "Buffers retired because their fence reported an error or panicked.",
		func(s *pinpool.Stats) float64 { return u64(s.FenceErrors) })
	counter("pin_splits_total", "Pin calls the system refused for their size and the backend retried in smaller parts.",
		func(s *pinpool.Stats) float64 { return u64(s.PinSplits) })
	counter("budget_waits_total", "Get calls that had to wait for room in the budget (or the lock limit).",
		func(s *pinpool.Stats) float64 { return u64(s.BudgetWaits) })
	counter("budget_refusals_total", "Growths refused by the budget (or the lock limit).",
		func(s *pinpool.Stats) float64 { return u64(s.BudgetRefusals) })
	counter("low_memory_refusals_total", "Growths refused by the system guard (MemAvailable floor).",
		func(s *pinpool.Stats) float64 { return u64(s.LowMemoryRefusals) })

	c.classBuffers = desc("class_buffers", `Buffers of a size class by state; size is the buffer capacity in bytes, or "other" for the classes beyond the class limit, summed.`, "size", "state")
	c.classGets = desc("class_gets_total", `Gets of a size class (size="other": of the classes beyond the class limit while they were).`, "size")
	c.classMisses = desc("class_misses_total", `Gets of a size class that found no idle buffer (size="other": as for pinpool_class_gets_total).`, "size")
	c.classGrows = desc("class_grows_total", `Backend allocations of a size class (size="other": as for pinpool_class_gets_total).`, "size")

	for _, f := range cfg.funcs {
		if f.read == nil {
			return nil, fmt.Errorf("metrics: %s: nil read function", f.name)
		}
		fq := prometheus.BuildFQName(Namespace, "", f.name)
		if !validName(fq) {
			return nil, fmt.Errorf("metrics: invalid metric name %q", fq)
		}
		if f.kind == prometheus.CounterValue && !strings.HasSuffix(f.name, "_total") {
			return nil, fmt.Errorf("metrics: counter %q: the name of a counter must end in _total", fq)
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
	ch <- c.memory
	for _, s := range c.scalars {
		ch <- s.desc
	}
	ch <- c.classes
	ch <- c.trimsBy
	ch <- c.growSeconds
	ch <- c.waitSeconds
	ch <- c.classBuffers
	ch <- c.classGets
	ch <- c.classMisses
	ch <- c.classGrows
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
	// The snapshot and the class state move together: concurrent scrapes
	// take their turn, so that the "other" counters only go up.
	c.mu.Lock()
	st := c.pool.Stats()
	ms := make([]prometheus.Metric, 0, 32+6*min(len(st.Classes), c.classLimit+1))
	send := func(d *prometheus.Desc, kind prometheus.ValueType, v float64, lvs ...string) {
		ms = append(ms, prometheus.MustNewConstMetric(d, kind, v, append([]string{c.backend}, lvs...)...))
	}
	c.collectClasses(send, st.Classes)
	c.mu.Unlock()
	for _, h := range []struct {
		d *prometheus.Desc
		h pinpool.Histogram
	}{{c.growSeconds, st.GrowTimes}, {c.waitSeconds, st.BudgetWaitTimes}} {
		ms = append(ms, constHistogram(h.d, h.h, c.backend))
	}

	for _, s := range []struct {
		state string
		v     int64
	}{
		{"held", st.BytesHeld}, {"in_use", st.BytesInUse}, {"idle", st.BytesIdle},
		{"pending", st.BytesPending}, {"retired", st.BytesRetired},
	} {
		send(c.memory, prometheus.GaugeValue, float64(s.v), s.state)
	}
	for _, s := range c.scalars {
		send(s.desc, s.kind, s.get(&st))
	}
	send(c.classes, prometheus.GaugeValue, float64(len(st.Classes)))
	for _, r := range pinpool.TrimReasons() {
		send(c.trimsBy, prometheus.CounterValue, float64(st.TrimsBy.Of(r)), r.String())
	}
	for i, f := range c.funcs {
		send(c.funcDescs[i], f.kind, f.read())
	}
	if c.copier != nil {
		c.copier.collect(send)
	}
	for _, m := range ms {
		ch <- m
	}
}

// collectClasses sends the per-class series of the classLimit classes that
// hold the most bytes and sums the rest under size="other". Called with
// c.mu held.
func (c *Collector) collectClasses(send func(*prometheus.Desc, prometheus.ValueType, float64, ...string), classes []pinpool.ClassStats) {
	own := make([]bool, len(classes))
	if len(classes) <= c.classLimit {
		for i := range own {
			own[i] = true
		}
	} else {
		order := make([]int, len(classes))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int {
			if r := cmp.Compare(classes[b].BytesHeld, classes[a].BytesHeld); r != 0 {
				return r
			}
			return cmp.Compare(classes[a].Size, classes[b].Size)
		})
		for _, i := range order[:c.classLimit] {
			own[i] = true
		}
		c.hasOther = true
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	var otherBuffers [4]int64 // in use, idle, pending, retired
	last := make(map[int64]classCounters, len(classes))
	for i, cs := range classes {
		cur := classCounters{cs.Gets, cs.Misses, cs.Grows}
		last[cs.Size] = cur
		if !own[i] {
			prev := c.last[cs.Size] // zero for a class not seen before: all of it is new
			c.other.gets += delta(cur.gets, prev.gets)
			c.other.misses += delta(cur.misses, prev.misses)
			c.other.grows += delta(cur.grows, prev.grows)
			otherBuffers[0] += cs.InUse
			otherBuffers[1] += cs.Idle
			otherBuffers[2] += cs.Pending
			otherBuffers[3] += cs.Retired
			continue
		}
		size := strconv.FormatInt(cs.Size, 10)
		send(c.classBuffers, gauge, float64(cs.InUse), size, "in_use")
		send(c.classBuffers, gauge, float64(cs.Idle), size, "idle")
		send(c.classBuffers, gauge, float64(cs.Pending), size, "pending")
		send(c.classBuffers, gauge, float64(cs.Retired), size, "retired")
		send(c.classGets, counter, float64(cs.Gets), size)
		send(c.classMisses, counter, float64(cs.Misses), size)
		send(c.classGrows, counter, float64(cs.Grows), size)
	}
	c.last = last
	if !c.hasOther {
		return
	}
	// Once there has been an "other", it stays (with zero gauges when every
	// class fits again), so that its counters are one unbroken series.
	send(c.classBuffers, gauge, float64(otherBuffers[0]), OtherClass, "in_use")
	send(c.classBuffers, gauge, float64(otherBuffers[1]), OtherClass, "idle")
	send(c.classBuffers, gauge, float64(otherBuffers[2]), OtherClass, "pending")
	send(c.classBuffers, gauge, float64(otherBuffers[3]), OtherClass, "retired")
	send(c.classGets, counter, float64(c.other.gets), OtherClass)
	send(c.classMisses, counter, float64(c.other.misses), OtherClass)
	send(c.classGrows, counter, float64(c.other.grows), OtherClass)
}

// delta is how much a counter went up from prev to cur; a counter found
// lower than before (a class made anew) counts from zero.
func delta(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// constHistogram turns a pool histogram into a Prometheus one: cumulative
// buckets by upper bound in seconds.
func constHistogram(d *prometheus.Desc, h pinpool.Histogram, lvs ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count(), h.Sum.Seconds(), buckets, lvs...)
}
