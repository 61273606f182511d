package metrics_test

import (
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/metrics"
	"github.com/pinpool/pinpool/transfer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeCopier returns fixed transfer statistics, as a *transfer.Copier
// would after some work (a real copier needs a GPU).
type fakeCopier struct{ st transfer.Stats }

func (f fakeCopier) Stats() transfer.Stats { return f.st }

func copierStats() transfer.Stats {
	var st transfer.Stats
	st.ToDevice.Staged = transfer.PathStats{Transfers: 3, Bytes: 3 << 30, Time: 70 * time.Millisecond}
	st.ToDevice.Pinned = transfer.PathStats{Transfers: 10, Bytes: 40960, Time: 80 * time.Microsecond}
	st.FromDevice.Direct = transfer.PathStats{Transfers: 2, Bytes: 8192, Time: 20 * time.Microsecond}
	st.FromDevice.Registered = transfer.PathStats{Transfers: 1, Bytes: 1 << 20, Time: 25 * time.Microsecond}
	st.Chunks, st.StagingWaits, st.StagingWaitTime = 1536, 40, 3*time.Millisecond
	st.StagingBytes, st.PeakStaging, st.WindowBytes = 4<<20, 32<<20, 32<<20
	st.Failed, st.Canceled = 1, 2
	return st
}

// TestCopierScrape scrapes a pool collector with WithCopier over HTTP and
// checks every transfer metric's value and labels.
func TestCopierScrape(t *testing.T) {
	p := newPool(t, pinpool.Options{})
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, p, metrics.WithPool("frames"), metrics.WithCopier(fakeCopier{copierStats()})); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, reg)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"pinpool_transfer_bytes_total", map[string]string{"direction": "H2D", "path": "staged", "pool": "frames"}, 3 << 30},
		{"pinpool_transfers_total", map[string]string{"direction": "H2D", "path": "pinned"}, 10},
		{"pinpool_transfer_seconds_total", map[string]string{"direction": "H2D", "path": "staged"}, 0.07},
		{"pinpool_transfer_bytes_total", map[string]string{"direction": "D2H", "path": "direct"}, 8192},
		{"pinpool_transfers_total", map[string]string{"direction": "D2H", "path": "registered"}, 1},
		{"pinpool_transfer_bytes_total", map[string]string{"direction": "D2H", "path": "staged"}, 0},
		{"pinpool_transfer_staging_chunks_total", nil, 1536},
		{"pinpool_transfer_staging_waits_total", nil, 40},
		{"pinpool_transfer_staging_wait_seconds_total", nil, 0.003},
		{"pinpool_transfer_staging_bytes", nil, 4 << 20},
		{"pinpool_transfer_staging_peak_bytes", nil, 32 << 20},
		{"pinpool_transfer_staging_window_bytes", nil, 32 << 20},
		{"pinpool_transfer_failures_total", nil, 1},
		{"pinpool_transfer_canceled_total", nil, 2},
	} {
		if got := value(t, fams, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if n := len(fams["pinpool_transfer_bytes_total"].GetMetric()); n != 10 {
		t.Errorf("pinpool_transfer_bytes_total has %d series, want 2 directions × 5 paths", n)
	}
}

// TestCopierLint checks the transfer metrics against Prometheus' naming
// rules, and that everything described is collected.
func TestCopierLint(t *testing.T) {
	p := newPool(t, pinpool.Options{})
	c := metrics.NewCollector(p, metrics.WithCopier(fakeCopier{copierStats()}))
	problems, err := testutil.CollectAndLint(c) // every metric, the pool's too
	lintAll(t, "CollectAndLint", problems, err)
	without := testutil.CollectAndCount(metrics.NewCollector(p))
	with := testutil.CollectAndCount(c)
	if with-without != 3*10+8 {
		t.Errorf("WithCopier added %d samples, want 38", with-without)
	}
}

// The real copier satisfies the option's interface.
var _ metrics.CopierStats = (*transfer.Copier)(nil)
