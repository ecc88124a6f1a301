// Command lambdazip packs a Lambda bootstrap binary into the zip that
// provided.al2023 functions take: one executable entry named "bootstrap",
// with a fixed modification time so the same binary gives the same zip.
//
//	go run ./tools/lambdazip -o dist/lambda/bootstrap-arm64.zip dist/lambda/arm64/bootstrap
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/snavio/snavio/internal/deploy/lambdazip"
)

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
	if err := lambdazip.Pack(*out, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "lambdazip:", err)
		os.Exit(1)
	}
}
