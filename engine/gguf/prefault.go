package gguf

import (
	"sync"
	"sync/atomic"
)

// Prefaulting: a model's upload copies every tensor out of the mapping, and each first touch
// of a page costs a fault that maps it into this process. Prefault maps them ahead, on other
// cores, while the GPU's instance and device are being created (~150 ms that the load
// otherwise spends waiting); on a file not yet in the page cache it is readahead for the
// upload. Its own gain on a cached file is not measured yet (VKLLM_LOAD_PREFAULT=0 for the
// A/B): the slow copies of a 1B model on the H200 were single-core copying, not faults.

// prefaultChunk is the bytes one madvise (or one touching pass) covers before it checks (a
// variable for tests) whether Close asked it to stop.
var prefaultChunk = 32 << 20

// prefaulter is a File's prefault run: stop asks it to end, wg waits for it.
type prefaulter struct {
	stop atomic.Bool
	wg   sync.WaitGroup
}

// Prefault starts mapping the file's tensor data into the process on up to workers goroutines
// and returns at once; Close stops it (between chunks) and waits for it before unmapping. It
// does nothing for a file held in memory (OpenBytes) or a header-only one, and a second call
// while one runs does nothing. Nor does a file larger than half the machine's memory: its
// pages would push each other (and the upload's) out of the page cache.
func (f *File) Prefault(workers int) {
	if len(f.mapped) == 0 || f.prefault != nil {
		return
	}
	var total int64
	for _, region := range f.mapped {
		total += int64(len(region))
	}
	if ram := physicalMemory(); ram > 0 && total > ram/2 {
		return
	}
	workers = max(1, workers)
	p := &prefaulter{}
	f.prefault = p
	var chunks [][]byte
	for _, region := range f.mapped {
		for off := 0; off < len(region); off += prefaultChunk {
			chunks = append(chunks, region[off:min(off+prefaultChunk, len(region))])
		}
	}
	var next atomic.Int64
	for range min(workers, len(chunks)) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for !p.stop.Load() {
				i := int(next.Add(1)) - 1
				if i >= len(chunks) {
					return
				}
				populate(chunks[i])
			}
		}()
	}
}

// stopPrefault ends a prefault run and waits for its goroutines (before the mapping goes).
func (f *File) stopPrefault() {
	if f.prefault == nil {
		return
	}
	f.prefault.stop.Store(true)
	f.prefault.wg.Wait()
}

// touchSink keeps the touching reads from being optimized away.
var touchSink atomic.Uint32

// touch reads one byte of every 4 KiB page of b.
func touch(b []byte) {
	var sum byte
	for i := 0; i < len(b); i += 4096 {
		sum += b[i]
	}
	touchSink.Add(uint32(sum))
}

// Prefaulted reports whether a Prefault run was started on f (it may have ended since).
func (f *File) Prefaulted() bool { return f.prefault != nil }
