package text

import "testing"

// BenchmarkBatchAtGoroot is BatchAt on the Go source tree at batch 64 x context 256, on one
// goroutine and on four (prefetch's default fan-out).
func BenchmarkBatchAtGoroot(b *testing.B) {
	root, err := DefaultCorpus()
	if err != nil {
		b.Skip(err)
	}
	src, err := Open(Config{Path: root, Extensions: GoSource(), Context: 256, BatchSize: 64, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	for i := range src.Len() { // map every file once, as a long run has
		if _, err := src.BatchAt(i); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := src.BatchAt(i % src.Len()); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
	})
	b.Run("4-workers", func(b *testing.B) {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := src.BatchAt(i % src.Len()); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
	})
}
