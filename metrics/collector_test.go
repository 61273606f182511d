package metrics_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// heapBackend is a Backend on the Go heap: the pool does not care whether
// its memory is locked, and the tests then need no mlock rights.
type heapBackend struct {
	allocs atomic.Int64
	name   string // "heap" if empty
}

func (h *heapBackend) Name() string {
	if h.name == "" {
		return "heap"
	}
	return h.name
}

func (h *heapBackend) Alloc(size int) (pinpool.Allocation, error) {
	h.allocs.Add(1)
	return heapAlloc(make([]byte, size)), nil
}

type heapAlloc []byte

func (a heapAlloc) Bytes() []byte                   { return a }
func (a heapAlloc) DevicePointer() (uintptr, error) { return 0, pinpool.ErrNotMapped }
func (a heapAlloc) Free() error                     { return nil }

const frame = 1920 * 1080 * 3 / 2

func newPool(t *testing.T, opt pinpool.Options) *pinpool.Pool {
	t.Helper()
	if opt.Backend == nil {
		opt.Backend = &heapBackend{}
	}
	opt.MinAvailable = -1 // no system guard: the figures must not depend on the host
	p, err := pinpool.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// getRelease does n Get+Release pairs of size bytes, one at a time.
func getRelease(t *testing.T, p *pinpool.Pool, size, n int) {
	t.Helper()
	for range n {
		b, err := p.Get(context.Background(), size)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

// scrape serves reg on a loopback httptest server, fetches /metrics with a
// real HTTP client and parses the text exposition.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(scrapeText(t, reg)))
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// scrapeText is scrape without the parsing: the text exposition.
func scrapeText(t *testing.T, reg *prometheus.Registry) []byte {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	srv := httptest.NewServer(mux) // 127.0.0.1, a free port
	defer srv.Close()
	client := &http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// value returns the value of the one sample of family name whose labels
// include want, failing the test when there is not exactly one.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	var found []float64
	for _, m := range f.GetMetric() {
		if hasLabels(m, want) {
			switch {
			case m.GetCounter() != nil:
				found = append(found, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				found = append(found, m.GetGauge().GetValue())
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d samples, want 1", name, want, len(found))
	}
	return found[0]
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// sizes returns the values of family name by the value of its label key,
// over the samples whose labels include want.
func byLabel(fams map[string]*dto.MetricFamily, name, key string, want map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fams[name].GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == key {
				if c := m.GetCounter(); c != nil {
					out[l.GetValue()] = c.GetValue()
				} else {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

func TestScrapeAfterActivity(t *testing.T) {
	p := newPool(t, pinpool.Options{Exact: true, Budget: 1 << 30})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p); err != nil {
		t.Fatal(err)
	}
	backend := map[string]string{"backend": "heap"}

	getRelease(t, p, frame, 10)
	fams := scrape(t, reg)
	for name, want := range map[string]float64{
		"pinpool_gets_total":   10,
		"pinpool_hits_total":   9,
		"pinpool_misses_total": 1,
	} {
		if got := value(t, fams, name, backend); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	held, err := p.Get(context.Background(), frame) // one buffer stays in use
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	fams = scrape(t, reg)
	st := p.Stats()
	if len(st.Classes) != 1 || st.Grows == 0 {
		t.Fatalf("stats %+v", st)
	}
	cs := st.Classes[0]
	class := float64(cs.Size)
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"pinpool_gets_total", 11},
		{"pinpool_hits_total", 10},
		{"pinpool_misses_total", 1},
		{"pinpool_grows_total", float64(st.Grows)},
		{"pinpool_grown_bytes_total", float64(st.BytesGrown)},
		{"pinpool_memory_peak_bytes", float64(st.PeakHeld)},
		{"pinpool_budget_bytes", 1 << 30},
		{"pinpool_lock_limit_bytes", float64(st.LockLimit)},
		{"pinpool_size_classes", 1},
		{"pinpool_trims_total", 0},
		{"pinpool_trimmed_bytes_total", 0},
		{"pinpool_grow_failures_total", 0},
		{"pinpool_free_failures_total", 0},
		{"pinpool_backend_panics_total", 0},
		{"pinpool_budget_waits_total", 0},
		{"pinpool_budget_refusals_total", 0},
		{"pinpool_low_memory_refusals_total", 0},
		{"pinpool_released_after_fence_total", 0},
		{"pinpool_fence_errors_total", 0},
		{"pinpool_huge_page_bytes", 0},
		{"pinpool_pin_splits_total", 0},
	} {
		if got := value(t, fams, tc.name, backend); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if st.LockLimit != 0 {
		t.Errorf("a heap backend has no lock limit: %d", st.LockLimit)
	}
	memory := byLabel(fams, "pinpool_memory_bytes", "state", backend)
	if want := map[string]float64{
		"held": float64(st.BytesHeld), "in_use": class, "idle": float64(st.BytesHeld) - class, "pending": 0, "retired": 0,
	}; !maps.Equal(memory, want) {
		t.Errorf("pinpool_memory_bytes by state = %v, want %v", memory, want)
	}
	if st.BytesHeld != 4*cs.Size {
		t.Errorf("the pool should have grown by the seed's 4 buffers: held %d, class %d", st.BytesHeld, cs.Size)
	}
	if f := fams["pinpool_grow_duration_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM || len(f.GetMetric()) != 1 {
		t.Errorf("pinpool_grow_duration_seconds: %v", f)
	} else if h := f.GetMetric()[0].GetHistogram(); h.GetSampleCount() != st.Grows || h.GetSampleSum() <= 0 || h.GetSampleSum() > 60 ||
		len(h.GetBucket()) < len(pinpool.DurationBounds) || h.GetBucket()[len(h.GetBucket())-1].GetCumulativeCount() > h.GetSampleCount() {
		t.Errorf("pinpool_grow_duration_seconds: %v, want %d growths", h, st.Grows)
	}
	if f := fams["pinpool_budget_wait_duration_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("pinpool_budget_wait_duration_seconds: %v", f)
	}
	for _, gone := range []string{"pinpool_bytes_held", "pinpool_bytes_in_use", "pinpool_bytes_peak_held", "pinpool_grow_max_seconds", "pinpool_failures_total", "pinpool_grow_seconds_total"} {
		if fams[gone] != nil {
			t.Errorf("%s is still exported", gone)
		}
	}
	size := strconv.FormatInt(cs.Size, 10)
	buffers := byLabel(fams, "pinpool_class_buffers", "state", map[string]string{"size": size})
	if want := map[string]float64{"in_use": 1, "idle": 3, "pending": 0, "retired": 0}; !maps.Equal(buffers, want) {
		t.Errorf("pinpool_class_buffers by state = %v, want %v", buffers, want)
	}
	for name, want := range map[string]float64{
		"pinpool_class_gets_total":   11,
		"pinpool_class_misses_total": 1,
		"pinpool_class_grows_total":  float64(cs.Grows),
	} {
		if got := value(t, fams, name, map[string]string{"size": size}); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if _, ok := byLabel(fams, "pinpool_class_gets_total", "size", nil)[metrics.OtherClass]; ok {
		t.Error(`size="other" with one class`)
	}
	if f := fams["pinpool_gets_total"]; f.GetType() != dto.MetricType_COUNTER || f.GetHelp() == "" {
		t.Errorf("pinpool_gets_total: type %v, help %q", f.GetType(), f.GetHelp())
	}
	if f := fams["pinpool_memory_bytes"]; f.GetType() != dto.MetricType_GAUGE {
		t.Errorf("pinpool_memory_bytes: type %v", f.GetType())
	}
}

// TestBudgetRefusals checks the failure counters: a budget too small for one
// frame refuses every TryGet.
func TestBudgetRefusals(t *testing.T) {
	p := newPool(t, pinpool.Options{Exact: true, Budget: 1 << 20})
	for range 3 {
		if _, err := p.TryGet(frame); !errors.Is(err, pinpool.ErrBudget) {
			t.Fatalf("TryGet = %v, want ErrBudget", err)
		}
	}
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, reg)
	if got := value(t, fams, "pinpool_budget_refusals_total", nil); got != 3 {
		t.Errorf("budget refusals = %v, want 3", got)
	}
	if got := value(t, fams, "pinpool_gets_total", nil); got != 3 {
		t.Errorf("gets = %v, want 3", got)
	}
	if got := value(t, fams, "pinpool_memory_bytes", map[string]string{"state": "held"}); got != 0 {
		t.Errorf("bytes held = %v, want 0", got)
	}
	if got := value(t, fams, "pinpool_budget_bytes", nil); got != 1<<20 {
		t.Errorf("budget = %v", got)
	}
}

// lintAll fails the test on every problem promlint finds.
func lintAll(t *testing.T, what string, problems []promlint.Problem, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, pr := range problems {
		t.Errorf("%s: lint: %s: %s", what, pr.Metric, pr.Text)
	}
}

// TestLintExposition lints every metric the package can export (the pool's,
// the per-class series with size="other", the transfer engine's and the
// hooks') with promlint, through testutil.CollectAndLint and on the text of
// an HTTP scrape of two pools in one registry, and fails on any problem.
func TestLintExposition(t *testing.T) {
	p := newPool(t, pinpool.Options{Exact: true})
	getRelease(t, p, frame, 3)
	for i := 1; i <= 4; i++ {
		getRelease(t, p, i*4096, 1) // slab classes too, beyond the limit
	}
	opts := []metrics.Option{
		metrics.WithClassLimit(2),
		metrics.WithCopier(fakeCopier{copierStats()}),
		metrics.WithCounterFunc("staged_bytes_total", "Bytes staged (hook test).", func() float64 { return 1 }),
		metrics.WithGaugeFunc("copies_in_flight", "Copies in flight (hook test).", func() float64 { return 1 }),
	}
	c := metrics.NewCollector(p, append(opts, metrics.WithPool("lint"))...)
	problems, err := testutil.CollectAndLint(c) // every metric: no names given
	lintAll(t, "CollectAndLint", problems, err)

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	q := newPool(t, pinpool.Options{})
	getRelease(t, q, 1<<20, 1)
	if err := metrics.Register(reg, q, metrics.WithPool("other_pool")); err != nil {
		t.Fatal(err)
	}
	text := scrapeText(t, reg)
	problems, err = promlint.New(bytes.NewReader(text)).Lint()
	lintAll(t, "HTTP exposition", problems, err)
	if !bytes.Contains(text, []byte(`size="other"`)) {
		t.Errorf(`the exposition has no size="other":\n%s`, text)
	}

	// Every described metric is collected, and nothing undescribed (the
	// pedantic registry checks it on every gather).
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n < 40 {
		t.Errorf("collected %d metrics", n)
	}
}

// TestTwoPools registers two pools in one registry under different WithPool
// names, scrapes them together, and checks that a second collector with a
// name already taken, or a second one without a name, is refused with a
// prometheus.AlreadyRegisteredError, even over another backend.
func TestTwoPools(t *testing.T) {
	a := newPool(t, pinpool.Options{Exact: true})
	b := newPool(t, pinpool.Options{Exact: true})
	other := newPool(t, pinpool.Options{Backend: &heapBackend{name: "heap2"}})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, a, metrics.WithPool("frames")); err != nil {
		t.Fatal(err)
	}
	if err := metrics.Register(reg, b, metrics.WithPool("audio")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		p    *pinpool.Pool
		name string
	}{
		{"the same pool and name again", b, "audio"},
		{"another pool under a name taken", other, "frames"},
	} {
		err := metrics.Register(reg, tc.p, metrics.WithPool(tc.name))
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			t.Errorf("%s: Register = %v, want an AlreadyRegisteredError", tc.what, err)
		}
	}

	getRelease(t, a, frame, 5)
	getRelease(t, b, 8192, 2)
	fams := scrape(t, reg)
	if got := value(t, fams, "pinpool_gets_total", map[string]string{"pool": "frames", "backend": "heap"}); got != 5 {
		t.Errorf("frames gets = %v, want 5", got)
	}
	if got := value(t, fams, "pinpool_gets_total", map[string]string{"pool": "audio"}); got != 2 {
		t.Errorf("audio gets = %v, want 2", got)
	}
	held := byLabel(fams, "pinpool_memory_bytes", "pool", map[string]string{"state": "held"})
	if len(held) != 2 || held["frames"] != float64(a.Stats().BytesHeld) || held["audio"] != float64(b.Stats().BytesHeld) {
		t.Errorf("pinpool_memory_bytes{state=held} by pool = %v", held)
	}

	// Without names: the first registers, the second (another backend,
	// too) is refused.
	reg = prometheus.NewRegistry()
	if err := metrics.Register(reg, a); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*pinpool.Pool{b, other} {
		err := metrics.Register(reg, p)
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			t.Errorf("a second unnamed pool (%s): Register = %v, want an AlreadyRegisteredError", p.Backend().Name(), err)
		}
	}
	// A named pool cannot join an unnamed one: a registry wants the same
	// label names on every series of a metric.
	if err := metrics.Register(reg, other, metrics.WithPool("named")); err == nil {
		t.Error("a named pool was registered next to an unnamed one")
	}
	fams = scrape(t, reg)
	if n := len(fams["pinpool_gets_total"].GetMetric()); n != 1 {
		t.Errorf("pinpool_gets_total has %d series, want 1", n)
	}
}

// classPool returns an Exact pool without slabs that grows one buffer at a
// time, holding reserve[i] buffers of (i+1)*64 KiB after one Get+Release
// of each size.
func classPool(t *testing.T, reserve []int) (*pinpool.Pool, []int) {
	t.Helper()
	p := newPool(t, pinpool.Options{Exact: true, SlabMax: -1, GrowCount: 1, MaxIdle: -1})
	var sizes []int
	for i, n := range reserve {
		size := (i + 1) << 16
		sizes = append(sizes, size)
		if err := p.Reserve(size, n); err != nil {
			t.Fatal(err)
		}
		getRelease(t, p, size, 1)
	}
	return p, sizes
}

// topClasses applies WithClassLimit's rule to a snapshot: the n classes
// with the most bytes held, ties by size.
func topClasses(st pinpool.Stats, n int) map[string]bool {
	cs := slices.Clone(st.Classes)
	slices.SortStableFunc(cs, func(a, b pinpool.ClassStats) int {
		if a.BytesHeld != b.BytesHeld {
			return cmp.Compare(b.BytesHeld, a.BytesHeld)
		}
		return cmp.Compare(a.Size, b.Size)
	})
	top := map[string]bool{}
	for _, c := range cs[:min(n, len(cs))] {
		top[strconv.FormatInt(c.Size, 10)] = true
	}
	return top
}

// TestClassLimit checks WithClassLimit: the classes that hold the most
// bytes (ties by size) have series of their own, the rest are summed under
// size="other", and the "other" counters never go back as classes move in
// and out of the top.
func TestClassLimit(t *testing.T) {
	// Class i (64 KiB * i) holds 11-i buffers: bytes ∝ i*(11-i), so 5 and 6
	// lead, 4 and 7 tie next (4 wins by size).
	reserve := []int{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	p, sizes := classPool(t, reserve)
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p, metrics.WithClassLimit(3)); err != nil {
		t.Fatal(err)
	}
	label := func(i int) string { return strconv.Itoa(sizes[i-1]) }

	check := func(step string, wantTop ...int) map[string]float64 {
		t.Helper()
		fams := scrape(t, reg)
		st := p.Stats()
		top := topClasses(st, 3)
		want := map[string]bool{metrics.OtherClass: true}
		for _, i := range wantTop {
			want[label(i)] = true
			if !top[label(i)] {
				t.Fatalf("%s: the rule's top 3 are %v, the test expects class %d among them: fix the test", step, top, i)
			}
		}
		gets := byLabel(fams, "pinpool_class_gets_total", "size", nil)
		got := map[string]bool{}
		for k := range gets {
			got[k] = true
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: class series for sizes %v, want %v", step, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		var rest [4]float64
		for _, cs := range st.Classes {
			size := strconv.FormatInt(cs.Size, 10)
			if want[size] {
				if gets[size] != float64(cs.Gets) {
					t.Errorf("%s: class %s gets %v, want %d", step, size, gets[size], cs.Gets)
				}
				continue
			}
			rest[0] += float64(cs.InUse)
			rest[1] += float64(cs.Idle)
			rest[2] += float64(cs.Pending)
			rest[3] += float64(cs.Retired)
		}
		buffers := byLabel(fams, "pinpool_class_buffers", "state", map[string]string{"size": metrics.OtherClass})
		if wantB := map[string]float64{"in_use": rest[0], "idle": rest[1], "pending": rest[2], "retired": rest[3]}; !maps.Equal(buffers, wantB) {
			t.Errorf("%s: other buffers %v, want %v", step, buffers, wantB)
		}
		if n := value(t, fams, "pinpool_size_classes", nil); n != float64(len(st.Classes)) {
			t.Errorf("%s: pinpool_size_classes = %v, want %d", step, n, len(st.Classes))
		}
		out := map[string]float64{}
		for _, name := range []string{"pinpool_class_gets_total", "pinpool_class_misses_total", "pinpool_class_grows_total"} {
			out[name] = value(t, fams, name, map[string]string{"size": metrics.OtherClass})
		}
		return out
	}

	// First scrape: "other" holds the whole counts of classes 1-3 and 7-10,
	// and the class series add up to the pool's.
	other1 := check("first scrape", 4, 5, 6)
	st := p.Stats()
	var wantGets, wantMisses, wantGrows uint64
	for _, cs := range st.Classes {
		if s := int(cs.Size); s != sizes[3] && s != sizes[4] && s != sizes[5] {
			wantGets += cs.Gets
			wantMisses += cs.Misses
			wantGrows += cs.Grows
		}
	}
	if want := map[string]float64{
		"pinpool_class_gets_total":   float64(wantGets),
		"pinpool_class_misses_total": float64(wantMisses),
		"pinpool_class_grows_total":  float64(wantGrows),
	}; !maps.Equal(other1, want) {
		t.Errorf("other counters %v, want %v", other1, want)
	}

	// Class 1 jumps to the top, class 4 drops out: class 1's series starts
	// at its total, and "other" gains class 4's gets since the last scrape
	// and nothing of class 1's.
	if err := p.Reserve(sizes[0], 60); err != nil {
		t.Fatal(err)
	}
	getRelease(t, p, sizes[0], 3)
	getRelease(t, p, sizes[3], 5)
	getRelease(t, p, sizes[8], 2) // in "other" all along
	other2 := check("after a move", 1, 5, 6)
	if got, want := other2["pinpool_class_gets_total"], other1["pinpool_class_gets_total"]+5+2; got != want {
		t.Errorf("other gets after a move = %v, want %v", got, want)
	}
	for name, v := range other2 {
		if v < other1[name] {
			t.Errorf("%s{size=other} went back: %v -> %v", name, other1[name], v)
		}
	}

	// Trim frees everything: every class holds 0 bytes, the ties go to the
	// smallest sizes, and "other" still does not go back.
	p.Trim()
	other3 := check("after Trim", 1, 2, 3)
	for name, v := range other3 {
		if v < other2[name] {
			t.Errorf("%s{size=other} went back after Trim: %v -> %v", name, other2[name], v)
		}
	}
}

// TestClassLimitBounds checks the default limit (32 classes and "other"
// with Options.Exact), WithClassLimit(0) (only "other"), a pool within the
// limit (no "other") and that a negative limit is refused.
func TestClassLimitBounds(t *testing.T) {
	p := newPool(t, pinpool.Options{Exact: true, SlabMax: -1, GrowCount: 1})
	for i := 1; i <= 40; i++ {
		getRelease(t, p, i*4096, 1)
	}
	for _, tc := range []struct {
		opts   []metrics.Option
		series int
		other  bool
	}{
		{nil, metrics.DefaultClassLimit + 1, true},
		{[]metrics.Option{metrics.WithClassLimit(0)}, 1, true},
		{[]metrics.Option{metrics.WithClassLimit(39)}, 40, true},
		{[]metrics.Option{metrics.WithClassLimit(40)}, 40, false},
		{[]metrics.Option{metrics.WithClassLimit(1000)}, 40, false},
	} {
		reg := prometheus.NewRegistry()
		if err := metrics.Register(reg, p, tc.opts...); err != nil {
			t.Fatal(err)
		}
		fams := scrape(t, reg)
		gets := byLabel(fams, "pinpool_class_gets_total", "size", nil)
		if len(gets) != tc.series {
			t.Errorf("%d opts: %d class series, want %d", len(tc.opts), len(gets), tc.series)
		}
		var sum float64
		for _, v := range gets {
			sum += v
		}
		if want := value(t, fams, "pinpool_gets_total", nil); sum != want {
			t.Errorf("%d opts: class gets add up to %v, want the pool's %v", len(tc.opts), sum, want)
		}
		if _, ok := gets[metrics.OtherClass]; ok != tc.other {
			t.Errorf("%d opts, %d series: other present = %v", len(tc.opts), tc.series, ok)
		}
		if n := len(byLabel(fams, "pinpool_class_buffers", "size", map[string]string{"state": "idle"})); n != tc.series {
			t.Errorf("pinpool_class_buffers has %d sizes, want %d", n, tc.series)
		}
	}
	if err := metrics.Register(prometheus.NewRegistry(), p, metrics.WithClassLimit(-1)); err == nil {
		t.Error("a negative class limit was accepted")
	}
}

// TestConcurrentScrapes scrapes one collector from several goroutines while
// the pool serves Gets of many sizes (run it with -race): every scraper
// sees the "other" counters and the pool's counters only go up.
func TestConcurrentScrapes(t *testing.T) {
	p := newPool(t, pinpool.Options{Exact: true, SlabMax: -1, GrowCount: 1})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p, metrics.WithClassLimit(2)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				size := (1 + (i*7+g)%12) * 4096
				b, err := p.Get(context.Background(), size)
				if err != nil {
					t.Error(err)
					return
				}
				b.Release()
				if i%50 == 0 {
					p.Trim() // reshuffles the top classes
				}
			}
		}()
	}
	var scrapers sync.WaitGroup
	for range 3 {
		scrapers.Add(1)
		go func() {
			defer scrapers.Done()
			prev := map[string]float64{}
			for range 50 {
				fams, err := reg.Gather()
				if err != nil {
					t.Error(err)
					return
				}
				byName := map[string]*dto.MetricFamily{}
				for _, f := range fams {
					byName[f.GetName()] = f
				}
				cur := map[string]float64{"pinpool_gets_total": byName["pinpool_gets_total"].GetMetric()[0].GetCounter().GetValue()}
				for _, name := range []string{"pinpool_class_gets_total", "pinpool_class_misses_total", "pinpool_class_grows_total"} {
					if v, ok := byLabel(byName, name, "size", nil)[metrics.OtherClass]; ok {
						cur[name] = v
					}
				}
				for name, v := range cur {
					if v < prev[name] {
						t.Errorf("%s went back: %v -> %v", name, prev[name], v)
					}
				}
				prev = cur
			}
		}()
	}
	scrapers.Wait()
	close(stop)
	wg.Wait()
}

func TestFuncHooks(t *testing.T) {
	p := newPool(t, pinpool.Options{})
	var staged atomic.Int64
	staged.Store(12345)
	reg := prometheus.NewRegistry()
	err := metrics.Register(reg, p, metrics.WithPool("x"),
		metrics.WithCounterFunc("transfer_staged_bytes_total", "Bytes copied through staging buffers.", func() float64 { return float64(staged.Load()) }),
		metrics.WithGaugeFunc("transfer_copies_in_flight", "Copies in flight.", func() float64 { return 2 }))
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, reg)
	labels := map[string]string{"pool": "x", "backend": "heap"}
	if got := value(t, fams, "pinpool_transfer_staged_bytes_total", labels); got != 12345 {
		t.Errorf("hook counter = %v", got)
	}
	if got := value(t, fams, "pinpool_transfer_copies_in_flight", labels); got != 2 {
		t.Errorf("hook gauge = %v", got)
	}
	if fams["pinpool_transfer_staged_bytes_total"].GetType() != dto.MetricType_COUNTER {
		t.Error("hook counter has the wrong type")
	}
}

func TestErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, nil); err == nil {
		t.Error("Register of a nil pool succeeded")
	}
	p := newPool(t, pinpool.Options{})
	if err := metrics.Register(nil, p); err == nil {
		t.Error("Register in a nil registry succeeded")
	}
	if err := metrics.Register(reg, p, metrics.WithGaugeFunc("bad name", "", func() float64 { return 0 })); err == nil {
		t.Error("an invalid name was accepted")
	}
	if err := metrics.Register(reg, p, metrics.WithGaugeFunc("nil_read", "x", nil)); err == nil {
		t.Error("a nil read function was accepted")
	}
	if err := metrics.Register(reg, p, metrics.WithCounterFunc("staged_bytes", "x", func() float64 { return 0 })); err == nil {
		t.Error("a counter name without _total was accepted")
	}
	if err := metrics.Register(reg, p, metrics.WithClassLimit(-1)); err == nil {
		t.Error("a negative class limit was accepted")
	}
	if err := metrics.Register(reg, p, metrics.WithPool("fr\xffames")); err == nil {
		t.Error("a pool name that is not valid UTF-8 was accepted")
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("Gather after the refused registrations: %v", err)
	}
	// A hook that collides with a built-in name is caught by the registry.
	if err := metrics.Register(reg, p, metrics.WithGaugeFunc("memory_bytes", "x", func() float64 { return 0 })); err == nil {
		t.Error("a duplicate name was accepted")
	}
	defer func() {
		if recover() == nil {
			t.Error("NewCollector(nil) did not panic")
		}
	}()
	metrics.NewCollector(nil)
}

// TestNeverGlobal checks that nothing is registered in the default registry.
func TestNeverGlobal(t *testing.T) {
	p := newPool(t, pinpool.Options{})
	_ = metrics.NewCollector(p)
	if err := metrics.Register(prometheus.NewRegistry(), p); err != nil {
		t.Fatal(err)
	}
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "pinpool_") {
			t.Errorf("%s is in the default registry", f.GetName())
		}
	}
}

// TestTrimsByReason checks that frees are exported by reason and add up
// to pinpool_trims_total.
func TestTrimsByReason(t *testing.T) {
	p := newPool(t, pinpool.Options{Exact: true, Budget: 16 << 20, IdleDecay: -1, IdleTimeout: -1})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p); err != nil {
		t.Fatal(err)
	}
	getRelease(t, p, 8<<20, 1)
	getRelease(t, p, 12<<20, 1) // evicts the idle 8 MiB: "cap"
	p.Trim()                    // frees the 12 MiB: "explicit"
	fams := scrape(t, reg)
	got := byLabel(fams, "pinpool_trims_by_reason_total", "reason", nil)
	var sum float64
	for _, r := range pinpool.TrimReasons() {
		if _, ok := got[r.String()]; !ok {
			t.Errorf("no series for reason %q", r)
		}
		sum += got[r.String()]
	}
	if got["cap"] != 1 || got["explicit"] != 1 || sum != value(t, fams, "pinpool_trims_total", nil) {
		t.Fatalf("trims by reason %v, total %v", got, value(t, fams, "pinpool_trims_total", nil))
	}
}

// TestInvalidUTF8Backend: a backend whose Name is not valid UTF-8 gets a
// label with the bad bytes replaced, so that scraping the registry still
// succeeds, for this pool and for the others registered beside it.
func TestInvalidUTF8Backend(t *testing.T) {
	bad := newPool(t, pinpool.Options{Backend: &heapBackend{name: "cuda:\xff/\xfe"}})
	good := newPool(t, pinpool.Options{})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, bad, metrics.WithPool("bad")); err != nil {
		t.Fatal(err)
	}
	if err := metrics.Register(reg, good, metrics.WithPool("good")); err != nil {
		t.Fatal(err)
	}
	getRelease(t, bad, 8192, 3)
	getRelease(t, good, 8192, 2)
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("Gather: %v", err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape status %d, want 200", resp.StatusCode)
	}
	fams := scrape(t, reg)
	if got := value(t, fams, "pinpool_gets_total", map[string]string{"pool": "bad", "backend": "cuda:\uFFFD/\uFFFD"}); got != 3 {
		t.Errorf("bad pool's gets = %v, want 3", got)
	}
	if got := value(t, fams, "pinpool_gets_total", map[string]string{"pool": "good"}); got != 2 {
		t.Errorf("good pool's gets = %v, want 2", got)
	}
}
