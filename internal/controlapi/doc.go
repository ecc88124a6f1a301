// Package controlapi is Snavio's control API: one HTTP handler (New,
// Handler) with the registry (routes, ACLs, keys, bans, quotas) and
// tenant configuration, tenant tokens, ingress credentials, telemetry
// streams, local queues, snapshots, replays, the archive, delivery keys
// and explain. The local server (`snavio dispatch serve`, internal/devserver)
// mounts it under /v1/; a Lambda host can mount the same handler with
// its own Config.
//
// Every endpoint goes one way in (Endpoints.Handle): the Authenticator
// turns the request's credential into a principal, the operator or one
// tenant (the bearer token locally; an IAM identity mapped by a Lambda
// host), operator-only endpoints refuse tenants with 403, and an error a
// handler returns is answered once: an Error as it is, a resource's
// store errors through its Errors map, anything else as a logged 500.
// Every error body is the envelope server.APIError, {"error","fix"},
// which the CLI decodes (internal/platform); the server's own refusals
// use it too, which is why it is defined there.
//
// Handler.endpoints is the one list of routes; openapi.json (served at
// GET /v1/openapi.json) describes each, and a test fails when the two
// differ. The request and response types are in the wire subpackage,
// which clients import without this package.
//
// Files are grouped by resource: registry*.go, keys, tokens.go,
// credentials.go, telemetry*.go, queues.go, snapshots.go, replays*.go,
// archive.go, delivery.go, explain.go; the shared path is errors.go,
// auth.go, respond.go and handler.go.
package controlapi
