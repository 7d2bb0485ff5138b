package cli

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nitro-go/nitro/backend"
)

// cudaPin and cudaLibs are what `nitro setup --cuda` installs; variables only so that tests can
// run it on small synthetic wheels.
var (
	cudaPin  = backend.CUDAPlugin
	cudaLibs = backend.CUDALibraries
)

// installCUDA installs the CUDA plugin into in.dir, then each NVIDIA library wheel's tree into
// in.dir/../nvidia (where the plugin's RPATH looks), then links the libraries the RPATH misses.
// Each step is idempotent by its own stamp, so an interrupted run resumes where it stopped.
func (in *installer) installCUDA(ctx context.Context) error {
	p := *in
	p.wheel, p.cuda = cudaPin(), true
	if err := p.install(ctx); err != nil {
		return err
	}
	root := filepath.Join(filepath.Dir(in.dir), backend.NVIDIALibsDir)
	for _, w := range cudaLibs() {
		if err := in.installTree(ctx, w, root); err != nil {
			return err
		}
	}
	if err := linkOffRPATH(root); err != nil {
		return err
	}
	fmt.Fprintf(in.stdout, "pjrt: the CUDA plugin and its NVIDIA libraries are installed; docs/gpu.md says how to check them on the GPU host\n")
	return nil
}

// inWheels is w's file in the folder dir, or "" when dir does not hold it.
func inWheels(dir string, w backend.Wheel) string {
	p := filepath.Join(dir, w.File)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	return ""
}

// installTree unpacks every file of wheel w under w.Member ("nvidia/") into root, the wheel's own
// layout kept. The files go to a temporary folder in root first; each top folder then replaces
// the installed one by rename, and the stamp, root/.<package>.installed, is written last.
func (in *installer) installTree(ctx context.Context, w backend.Wheel, root string) error {
	stamp := filepath.Join(root, "."+w.Package+".installed")
	if b, err := os.ReadFile(stamp); err == nil && !in.force && strings.TrimSpace(string(b)) == w.SHA256 {
		fmt.Fprintf(in.stdout, "pjrt: %s %s already installed in %s\n", w.Package, w.Version, root)
		return nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("creating the NVIDIA library folder: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".unpack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	wheelPath := ""
	if in.wheels != "" {
		wheelPath = inWheels(in.wheels, w)
	}
	if wheelPath != "" {
		if err := checkWheel(wheelPath, w); err != nil {
			return err
		}
	} else {
		d := *in
		d.wheel = w
		if wheelPath, err = d.download(ctx, tmp); err != nil {
			return err
		}
	}
	unpacked := filepath.Join(tmp, "tree")
	if err := unpackTree(ctx, wheelPath, w.Member, unpacked); err != nil {
		return err
	}
	if err := os.Remove(stamp); err != nil && !os.IsNotExist(err) {
		return err
	}
	es, err := os.ReadDir(unpacked)
	if err != nil {
		return err
	}
	for _, e := range es {
		dst := filepath.Join(root, e.Name())
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(unpacked, e.Name()), dst); err != nil {
			return err
		}
	}
	if err := os.WriteFile(stamp, []byte(w.SHA256+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing the install stamp: %w", err)
	}
	fmt.Fprintf(in.stdout, "pjrt: installed %s %s in %s\n", w.Package, w.Version, root)
	return nil
}

// unpackTree writes every file of the wheel under prefix into dst, keeping paths below prefix and
// the files' execute bits. A member that would land outside dst is refused.
func unpackTree(ctx context.Context, wheelPath, prefix, dst string) error {
	z, err := zip.OpenReader(wheelPath)
	if err != nil {
		return fmt.Errorf("opening the wheel %s: %w", wheelPath, err)
	}
	defer z.Close()
	n := 0
	for _, f := range z.File {
		if !strings.HasPrefix(f.Name, prefix) || strings.HasSuffix(f.Name, "/") {
			continue
		}
		rel := path.Clean(strings.TrimPrefix(f.Name, prefix))
		if rel == "." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) {
			return fmt.Errorf("the wheel %s has a member %q outside %s: refusing it; nothing was installed", wheelPath, f.Name, prefix)
		}
		if err := unpackFile(ctx, f, filepath.Join(dst, filepath.FromSlash(rel))); err != nil {
			return fmt.Errorf("unpacking %s from %s: %w", f.Name, wheelPath, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("the wheel %s has nothing under %s: it is not an NVIDIA library wheel; nothing was installed", wheelPath, prefix)
	}
	return nil
}

func unpackFile(ctx context.Context, f *zip.File, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	src, err := f.Open()
	if err != nil {
		return err
	}
	defer src.Close()
	mode := os.FileMode(0o644)
	if f.Mode()&0o111 != 0 || strings.Contains(path.Base(f.Name), ".so") {
		mode = 0o755
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	// zip checks the member's CRC-32 at its end, so a corrupt member is an error here.
	_, err = io.Copy(out, ctxReader{ctx, src})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// linkOffRPATH links the libraries the plugin opens by name but its RPATH misses
// (backend.CUDAOffRPATH) into nvidia/cuda_runtime/lib, which the RPATH names.
func linkOffRPATH(root string) error {
	libDir := filepath.Join(root, "cuda_runtime", "lib")
	if _, err := os.Stat(libDir); err != nil {
		return fmt.Errorf("the NVIDIA libraries in %s have no cuda_runtime/lib (nvidia-cuda-runtime-cu12): reinstall with `nitro setup --cuda --force`", root)
	}
	for _, rel := range backend.CUDAOffRPATH {
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			continue // a library this install does not carry
		}
		link := filepath.Join(libDir, path.Base(rel))
		if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.Symlink(path.Join("..", "..", rel), link); err != nil {
			return fmt.Errorf("linking %s into %s: %w", rel, libDir, err)
		}
	}
	return nil
}
