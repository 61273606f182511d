package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// heapBackend is a Backend on the Go heap: the pool does not care whether
// its memory is locked, and the tests then need no mlock rights.
type heapBackend struct{ allocs atomic.Int64 }

func (*heapBackend) Name() string { return "heap" }

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
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
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
		{"pinpool_bytes_held", float64(st.BytesHeld)},
		{"pinpool_bytes_in_use", class},
		{"pinpool_bytes_idle", float64(st.BytesHeld) - class},
		{"pinpool_bytes_pending", 0},
		{"pinpool_bytes_retired", 0},
		{"pinpool_bytes_peak_held", float64(st.PeakHeld)},
		{"pinpool_budget_bytes", 1 << 30},
		{"pinpool_trims_total", 0},
		{"pinpool_failures_total", 0},
		{"pinpool_budget_waits_total", 0},
		{"pinpool_budget_refusals_total", 0},
		{"pinpool_low_memory_refusals_total", 0},
		{"pinpool_released_after_fence_total", 0},
		{"pinpool_fence_errors_total", 0},
	} {
		if got := value(t, fams, tc.name, backend); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if st.BytesHeld != 4*cs.Size {
		t.Errorf("the pool should have grown by the seed's 4 buffers: held %d, class %d", st.BytesHeld, cs.Size)
	}
	if v := value(t, fams, "pinpool_grow_seconds_total", nil); v <= 0 || v > 60 {
		t.Errorf("pinpool_grow_seconds_total = %v", v)
	}
	if v := value(t, fams, "pinpool_grow_max_seconds", nil); v <= 0 || v > value(t, fams, "pinpool_grow_seconds_total", nil) {
		t.Errorf("pinpool_grow_max_seconds = %v", v)
	}
	size := strconv.FormatInt(cs.Size, 10)
	for state, want := range map[string]float64{"in_use": 1, "idle": 3, "pending": 0} {
		if got := value(t, fams, "pinpool_class_buffers", map[string]string{"size": size, "state": state}); got != want {
			t.Errorf("class_buffers{state=%q} = %v, want %v", state, got, want)
		}
	}
	if got := value(t, fams, "pinpool_class_gets_total", map[string]string{"size": size}); got != 11 {
		t.Errorf("class_gets_total = %v, want 11", got)
	}
	if got := value(t, fams, "pinpool_class_misses_total", map[string]string{"size": size}); got != 1 {
		t.Errorf("class_misses_total = %v, want 1", got)
	}
	if f := fams["pinpool_gets_total"]; f.GetType() != dto.MetricType_COUNTER || f.GetHelp() == "" {
		t.Errorf("pinpool_gets_total: type %v, help %q", f.GetType(), f.GetHelp())
	}
	if f := fams["pinpool_bytes_held"]; f.GetType() != dto.MetricType_GAUGE {
		t.Errorf("pinpool_bytes_held: type %v", f.GetType())
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
	if got := value(t, fams, "pinpool_bytes_held", nil); got != 0 {
		t.Errorf("bytes held = %v, want 0", got)
	}
}

func TestLint(t *testing.T) {
	p := newPool(t, pinpool.Options{})
	getRelease(t, p, frame, 3)
	getRelease(t, p, 4096, 3) // a slab class too
	c := metrics.NewCollector(p, metrics.WithPool("lint"),
		metrics.WithCounterFunc("staged_bytes_total", "Bytes staged (hook test).", func() float64 { return 1 }))
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
	// Every described metric is collected, and nothing undescribed.
	if n := testutil.CollectAndCount(c); n < 30 {
		t.Errorf("collected %d metrics", n)
	}
}

func TestTwoPools(t *testing.T) {
	a := newPool(t, pinpool.Options{Exact: true})
	b := newPool(t, pinpool.Options{Exact: true})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, a, metrics.WithPool("frames")); err != nil {
		t.Fatal(err)
	}
	if err := metrics.Register(reg, b, metrics.WithPool("audio")); err != nil {
		t.Fatal(err)
	}
	// The same labels again are refused, not silently merged.
	err := metrics.Register(reg, b, metrics.WithPool("audio"))
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		t.Errorf("second registration with the same labels: %v", err)
	}
	getRelease(t, a, frame, 5)
	getRelease(t, b, 8192, 2)
	fams := scrape(t, reg)
	if got := value(t, fams, "pinpool_gets_total", map[string]string{"pool": "frames"}); got != 5 {
		t.Errorf("frames gets = %v, want 5", got)
	}
	if got := value(t, fams, "pinpool_gets_total", map[string]string{"pool": "audio"}); got != 2 {
		t.Errorf("audio gets = %v, want 2", got)
	}
	if n := len(fams["pinpool_bytes_held"].GetMetric()); n != 2 {
		t.Errorf("bytes_held has %d series, want 2", n)
	}
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
	// A hook that collides with a built-in name is caught by the registry.
	if err := metrics.Register(reg, p, metrics.WithGaugeFunc("bytes_held", "x", func() float64 { return 0 })); err == nil {
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
