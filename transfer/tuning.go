package transfer

// tuning holds the staging plan's internal constants. They are not
// options: a user has no way to know better values than the measured
// ones. The package's benchmarks build copiers with other values
// (newCopier with a tuning, gpu.tunedCopier) to compare them with the
// defaults in the same run.
type tuning struct {
	// coopChunk is the chunk size of a cooperative transfer: small, so
	// that the first DMA starts early and the last one ends soon after the
	// last CPU copy; several such chunks share one staging buffer.
	coopChunk int
	// coopShare is the share of the window a cooperative transfer may
	// hold, per direction, as a divisor: 1 is the whole window, 2 half of
	// it. Zero turns the cooperative mode off. Host to device, the
	// cooperative mode stayed faster than the chunked one up to the whole
	// window; device to host, only up to half of it.
	coopShare [2]int
	// minStripe is the smallest part of a cooperative chunk that one lane
	// copies: below it, claiming the work costs more than sharing it saves.
	minStripe int
	// minChunk is the smallest chunk of the chunked mode when a transfer is
	// cut finer than ChunkSize to give every lane work.
	minChunk int
	// coldShare divides the lanes of a cooperative host-to-device
	// transfer that finds the standing lanes asleep (zero: all lanes).
	// Its caller starts copying at once, and lanes that wake up late find
	// most of the work done but still pay their wake-up: in a paced stream
	// of frames, half the lanes moved a frame as fast for less CPU time
	// (docs/results/2026-12-01-paced-frames.md). Device to host, the lanes
	// wake while the first chunk's DMA runs, and all of them copy out.
	coldShare int
	// batchMax, per direction, is the most chunks a chunked transfer
	// issues in one batch (batch.go); below 2, each chunk is issued on its
	// own. Host to device, pairs moved 256 MiB and 1 GiB 2-4% faster;
	// device to host, where a lane issues a chunk's copy before it has any
	// work for it, batches gained nothing
	// (docs/results/2026-12-01-dma-ceiling.md).
	batchMax [2]int
	// batchDepth is how many batches the stream must have queued for a
	// ready chunk to be parked rather than issued: enough work for the
	// DMA while the chunk waits for the next one.
	batchDepth int
	// batchFrom is how many rounds of chunks (one per lane) a transfer
	// issues before it parks any: the first DMA waits for nothing.
	batchFrom int
}

// defaultTuning is the tuning of every copier made by New.
func defaultTuning() tuning {
	return tuning{
		coopChunk: 1 << 20,
		coopShare: [2]int{HostToDevice: 1, DeviceToHost: 2},
		minStripe: 64 << 10, minChunk: 256 << 10, coldShare: 2,
		batchMax: [2]int{HostToDevice: 2}, batchDepth: 2, batchFrom: 1,
	}
}
