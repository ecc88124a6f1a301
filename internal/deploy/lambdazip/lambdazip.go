// Package lambdazip packs and builds the Lambda bootstrap zip that
// provided.al2023 functions take: one executable entry named "bootstrap",
// with a fixed modification time so the same binary gives the same zip
// (and so the same content hash, which is its S3 key at deploy).
package lambdazip

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// epoch is every entry's modification time (zip cannot store earlier).
var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Write packs the bootstrap binary read from bin into w.
func Write(w io.Writer, bin io.Reader) error {
	zw := zip.NewWriter(w)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: epoch}
	h.SetMode(0o755)
	fw, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fw, bin); err != nil {
		return err
	}
	return zw.Close()
}

// Pack writes the binary at bin into a new zip at out; a failed pack
// leaves no file behind.
func Pack(out, bin string) (err error) {
	in, err := os.Open(bin)
	if err != nil {
		return fmt.Errorf("%w: give the bootstrap binary built for linux", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: give the bootstrap binary", bin)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = errors.Join(err, os.Remove(out))
		}
	}()
	return Write(f, in)
}

// Check reports whether b is a bootstrap zip: a zip with an executable
// entry named bootstrap.
func Check(b []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return fmt.Errorf("not a zip (%v): give the bootstrap zip that make lambda writes to dist/lambda/", err)
	}
	for _, f := range zr.File {
		if f.Name == "bootstrap" {
			if f.Mode()&0o111 == 0 {
				return errors.New("its bootstrap entry is not executable: pack it with make lambda")
			}
			return nil
		}
	}
	return errors.New("it has no entry named bootstrap: give the zip that make lambda writes to dist/lambda/")
}

// Build cross-builds ./cmd/snavio-lambda of the module at srcDir for
// linux/goarch (arm64 or amd64) as `make lambda` does, and returns the
// zip's bytes.
func Build(ctx context.Context, srcDir, goarch string) ([]byte, error) {
	if _, err := os.Stat(filepath.Join(srcDir, "cmd", "snavio-lambda")); err != nil {
		return nil, fmt.Errorf("no bootstrap zip given and %s holds no snavio source to build one (cmd/snavio-lambda): pass --zip dist/lambda/bootstrap-%s.zip from make lambda or a release", srcDir, goarch)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("no bootstrap zip given and no go command to build one: pass --zip (make lambda, or a release's zip)")
	}
	dir, err := os.MkdirTemp("", "snavio-lambda-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bootstrap")
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", bin, "./cmd/snavio-lambda")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the bootstrap: %v\n%s", err, stderr.Bytes())
	}
	in, err := os.Open(bin)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
