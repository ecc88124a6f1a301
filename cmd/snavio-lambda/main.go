// Command snavio-lambda is the bootstrap of snavio's Lambda functions
// (provided.al2023); SNAVIO_FUNCTION chooses the handler: ingest or slow
// (the stages), outbox, snapshot, queue-monitor or fairness-auditor (the
// jobs), or control (the control API behind a Function URL).
// docs/lambda.md has each one's trigger and configuration.
package main

import (
	"context"
	"log/slog"
	"os"

	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/lambda"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	build := lambda.Handler
	switch fn := os.Getenv(lambda.EnvFunction); {
	case lambda.IsJob(fn):
		build = lambda.JobHandler
	case fn == lambda.FunctionControl:
		// The control API maps callers by the stack's role names.
		build = func(ctx context.Context, getenv func(string) string, log *slog.Logger) (any, error) {
			return lambda.ControlHandler(ctx, getenv, log, func(env string) lambda.ControlNames { return stack.Names{Env: env} })
		}
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
