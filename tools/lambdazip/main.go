// Command lambdazip packs a Lambda bootstrap binary into the zip that
// provided.al2023 functions take: one executable entry named "bootstrap",
// with a fixed modification time so the same binary gives the same zip.
//
//	go run ./tools/lambdazip -o dist/lambda/bootstrap-arm64.zip dist/lambda/arm64/bootstrap
package main

import (
	"archive/zip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// epoch is every entry's modification time (zip cannot store earlier).
var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	out := flag.String("o", "", "the zip to write")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: lambdazip -o OUT.zip BOOTSTRAP")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := pack(*out, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "lambdazip:", err)
		os.Exit(1)
	}
}

// pack writes bin into a new zip at out as the entry "bootstrap", mode
// 0755.
func pack(out, bin string) (err error) {
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
	zw := zip.NewWriter(f)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: epoch}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, in); err != nil {
		return err
	}
	return zw.Close()
}
