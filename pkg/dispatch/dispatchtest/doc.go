// Package dispatchtest holds the contract suites of the pkg/dispatch
// ports, in the manner of testing/fstest: every store (memstore, the
// embedded store, the AWS store) runs the same suite from its own tests,
// for example
//
//	func TestRegistry(t *testing.T) {
//		dispatchtest.TestRegistry(t, func(t *testing.T) registry.Store { return memstore.NewRegistry() })
//	}
//
// The suites take time only from the arguments they pass to the store and
// never sleep. Each factory must return an empty store each time.
package dispatchtest
