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
	// (BenchmarkPacedFrames). Device to host, the lanes
	// wake while the first chunk's DMA runs, and all of them copy out.
	coldShare int
}

// defaultTuning is the tuning of every copier made by New.
func defaultTuning() tuning {
	return tuning{
		coopChunk: 1 << 20,
		coopShare: [2]int{HostToDevice: 1, DeviceToHost: 2},
		minStripe: 64 << 10, minChunk: 256 << 10, coldShare: 2,
	}
}
