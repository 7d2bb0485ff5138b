package render_test

import (
	"fmt"
	"image/color"
	"log"
	"os"
	"path/filepath"

	"github.com/nitro-go/nitro/render"
)

// Draw two 4x4 "digits" with their true and predicted labels, the wrong prediction in red, and
// write the grid as a PNG.
func Example() {
	var cells []render.Cell
	for i, pred := range []int{1, 3} {
		pix := make([]float32, 16)
		for j := range pix {
			pix[j] = float32((i + j) % 2)
		}
		img, err := render.Gray(pix, 4, 4)
		if err != nil {
			log.Fatal(err)
		}
		c := color.RGBA{0, 140, 0, 255}
		if pred != i+1 {
			c = color.RGBA{200, 0, 0, 255}
		}
		cells = append(cells, render.Cell{Image: img, Caption: []render.Line{
			{Text: fmt.Sprintf("label %d", i+1)}, {Text: fmt.Sprintf("pred %d", pred), Color: c},
		}})
	}
	grid, err := render.Grid(cells, render.GridOptions{Scale: 4})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "render-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := render.WritePNG(filepath.Join(dir, "grid.png"), grid); err != nil {
		log.Fatal(err)
	}
	fmt.Println(grid.Bounds().Dx(), "x", grid.Bounds().Dy())
	// Output: 110 x 50
}
