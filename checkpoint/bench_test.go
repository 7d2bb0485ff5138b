package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSaveVsPlain saves a 256 MiB record through TopK (temp file, fsync, rename, directory
// fsync, two manifest writes) and writes the same bytes plainly (one write, fsync), and reports
// plain/save as "bandwidth-ratio" (the goal: >= 0.8) and Info's time on the file.
func BenchmarkSaveVsPlain(b *testing.B) {
	const size = 256 << 20
	r := epochRecord(1, size, 0.5)
	dir := b.TempDir()
	tk, _ := NewTopK(1, "val_loss", "min", dir, nil)
	var save, plain, info time.Duration
	for i := range b.N {
		r.Epoch, r.Step = i+1, (i+1)*100
		t0 := time.Now()
		path, err := tk.Save(r)
		if err != nil {
			b.Fatal(err)
		}
		save += time.Since(t0)

		t0 = time.Now()
		f, err := os.Create(filepath.Join(dir, "plain.bin"))
		if err != nil {
			b.Fatal(err)
		}
		f.Write(r.Tensors[0].Data)
		f.Sync()
		f.Close()
		plain += time.Since(t0)
		os.Remove(filepath.Join(dir, "plain.bin"))

		t0 = time.Now()
		if _, err := Info(path); err != nil {
			b.Fatal(err)
		}
		info += time.Since(t0)
	}
	b.ReportMetric(float64(plain)/float64(save), "bandwidth-ratio")
	b.ReportMetric(float64(size)/(1<<20)/save.Seconds()*float64(b.N), "save-MiB/s")
	b.ReportMetric(float64(info.Microseconds())/float64(b.N), "info-µs")
}
