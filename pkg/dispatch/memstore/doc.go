// Package memstore holds in-memory implementations of the pkg/dispatch
// ports, for tests, benchmarks and `snavio dispatch serve --ephemeral`:
// Registry (registry.Store), Snapshots (snapshot.Store), Flow
// (flow.Store), Archive (dispatch.Archive) and Handoff
// (dispatch.HandoffQueue). Each passes its dispatchtest contract suite. Nothing is
// durable; every type is safe for concurrent use and takes time only from
// its callers.
package memstore
