// Package server is the HTTP side of `snavio dispatch serve`.
//
// It is a small facade in the shape of Temporal's devserver:
// StartOptions -> Start -> *Server, with Server.Shutdown draining in-flight
// requests and then running the drain hooks the caller registered (the
// outbox flush, for one). Behind it sit:
//
//   - the ingress (Ingress): EventBridge PutEvents spoken as AWS JSON 1.1, so
//     a producer's own AWS SDK works against it by changing the endpoint. It
//     verifies the request's SigV4 signature against the tenants' ingress
//     credentials (SigV4Verifier, FileCredentialStore), refuses entries whose
//     Source is not the signer's tenant's, validates the request as
//     EventBridge does and hands the valid entries to a Pipeline, which the
//     dispatcher implements;
//   - connection hygiene: a Host check against DNS rebinding, a per-client
//     connection cap, header and body deadlines, bodies read before a
//     request slot is taken;
//   - backpressure: bounded in-flight requests and entries, answered with 503
//     and Retry-After when saturated, never queued;
//   - /healthz, /readyz and /metrics (Metrics: the Prometheus text format
//     written by hand, the dispatcher's telemetry.Metrics, the HTTP golden
//     metrics and the Go runtime and process metrics);
//   - control-API authentication (Authenticator): an operator token kept
//     0600 in the data directory, tenant tokens scoped to one tenant, and
//     helpers that require operator or same-tenant access.
//
// See docs/server/README.md for the decisions behind each part.
package server
