// Package render draws small PNG figures for a model's samples without a plotting library: Gray
// turns a row of pixel values into a grayscale image, Grid lays images out in a grid with a
// caption of coloured lines under each (true label, predicted label), in a built-in bitmap font
// (golang.org/x/image/font/basicfont, 7x13 pixels, ASCII; other runes draw as a box), and WritePNG
// writes an image durably: a reader finds the previous file or the whole new one, never half of
// one (tensorfile's temporary file, fsync, rename).
// Guide: docs/experiment.md (Render and Visualize).
//
// Left to the caller: what to draw and where the file goes (core's Render names the file under
// the run dir and hands the experiment's Visualize image to WritePNG).
//
// Errors name the argument and the fix: no cells, a nil or empty image, a pixel slice that does
// not match its width and height, a NaN pixel, a figure over MaxPixels; WritePNG returns
// tensorfile's *WriteError naming the step that failed. Nothing panics. Every function is safe
// for concurrent use; Grid and Gray return new images and keep no state.
package render
