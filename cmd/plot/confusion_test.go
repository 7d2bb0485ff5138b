package plot

import (
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const confusionLines = `{"type":"confusion","epoch":1,"labels":["cat","dog","owl"],"matrix":[[5,5,0],[5,5,0],[0,0,1]]}
{"type":"confusion","epoch":2,"labels":["cat","dog","owl"],"matrix":[[9,1,0],[0,10,0],[1,0,3]]}
`

// darkest counts img's pixels of the heat map's darkest shade (a row's whole fraction).
func darkest(img image.Image) int {
	want := blues(64)[63]
	wr, wg, wb, _ := want.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r == wr && g == wg && bl == wb {
				n++
			}
		}
	}
	return n
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// The last confusion line is drawn as confusion.png and listed in the index; the shade is the
// row fraction, so a matrix with a whole row on one cell has darkest-shade pixels and one with
// no row above half has none.
func TestConfusionHeatMap(t *testing.T) {
	run, err := Parse(strings.NewReader(confusionLines))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Confusions) != 2 || run.Confusions[1].Epoch != 2 || !reflect.DeepEqual(run.Confusions[1].Labels, []string{"cat", "dog", "owl"}) ||
		!reflect.DeepEqual(run.Confusions[1].Matrix, [][]int{{9, 1, 0}, {0, 10, 0}, {1, 0, 3}}) {
		t.Fatalf("Confusions = %+v", run.Confusions)
	}
	dir := t.TempDir()
	opts := Options{Width: 480, Height: 400}
	files, err := opts.Write(run, dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "confusion.png")
	if len(files) < 2 || files[len(files)-2] != path {
		t.Fatalf("files %v, want confusion.png before the index", files)
	}
	checkPNG(t, path, opts.Width, opts.Height)
	img := readPNG(t, path)
	// dog's row is 10 of 10 on its diagonal: one cell of the darkest shade, about a ninth of the plot.
	if n := darkest(img); n < opts.Width*opts.Height/40 {
		t.Errorf("confusion.png has %d pixels of the darkest shade; want a whole cell's (dog -> dog is 10/10)", n)
	}
	index, _ := os.ReadFile(files[len(files)-1])
	if !strings.Contains(string(index), "[confusion.png](confusion.png): confusion matrix of epoch 2") || !strings.Contains(string(index), "3 classes, 24 examples, accuracy 0.9167") {
		t.Errorf("index.md:\n%s", index)
	}
	// Epoch 1 alone: no row has more than half on one cell, so nothing is the darkest shade.
	run.Confusions = run.Confusions[:1]
	run.Confusions[0].Matrix = [][]int{{5, 5, 0}, {5, 5, 0}, {0, 1, 1}}
	if _, err := opts.Write(run, dir); err != nil {
		t.Fatal(err)
	}
	if n := darkest(readPNG(t, path)); n != 0 {
		t.Errorf("a matrix with no row fraction of 1 drew %d pixels of the darkest shade", n)
	}
}

func TestConfusionMalformed(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"type":"confusion","epoch":1,"matrix":[[1,2],[3]]}`, "row 1 has 1 entries, want 2"},
		{`{"type":"confusion","epoch":1,"labels":["a"],"matrix":[[1,2],[3,4]]}`, "1 confusion labels for 2 classes"},
		{`{"type":"confusion","epoch":1,"matrix":[]}`, "want a non-empty array"},
		{`{"type":"confusion","matrix":[[1]]}`, `no "epoch" field`},
	} {
		_, err := Parse(strings.NewReader(tc.line + "\n"))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrMalformed containing %q", tc.line, err, tc.want)
		}
	}
}
