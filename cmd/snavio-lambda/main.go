// Command snavio-lambda is the bootstrap of snavio's Lambda functions
// (provided.al2023); SNAVIO_FUNCTION chooses the handler: ingest or slow
// (the stages), outbox, snapshot, queue-monitor or fairness-auditor (the
// jobs). docs/lambda.md has each one's trigger and configuration.
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
	build := lambda.Handler
	if lambda.IsJob(os.Getenv(lambda.EnvFunction)) {
		build = lambda.JobHandler
	}
	h, err := build(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("snavio-lambda: init failed", "err", err)
		os.Exit(1)
	}
	// WithEnableSIGTERM registers the extension that makes Lambda send
	// SIGTERM at shutdown, when the host stores its kept telemetry.
	awslambda.StartWithOptions(h, awslambda.WithEnableSIGTERM())
}
