// Command snavio-lambda is the bootstrap of snavio's Lambda functions
// (provided.al2023); SNAVIO_FUNCTION chooses the handler (docs/lambda.md).
package main

import (
	"context"
	"log/slog"
	"os"

	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/snavio/snavio/internal/lambda"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h, err := lambda.Handler(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("snavio-lambda: init failed", "err", err)
		os.Exit(1)
	}
	// WithEnableSIGTERM registers the extension that makes Lambda send
	// SIGTERM at shutdown, when the host stores its kept telemetry.
	awslambda.StartWithOptions(h, awslambda.WithEnableSIGTERM())
}
