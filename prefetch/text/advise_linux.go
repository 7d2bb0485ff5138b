package text

import "syscall"

// adviseRandom tells the kernel a large mapping is read at random, so that a window's page
// fault reads that page, not the read-around of its neighbours: of a corpus larger than memory,
// only what the windows touch is read.
func adviseRandom(b []byte) { _ = syscall.Madvise(b, syscall.MADV_RANDOM) }
