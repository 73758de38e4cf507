// Package benchtest is a test helper (it imports testing; production code
// must not import it). It runs a package's own go test benchmarks over
// bench's named, seeded workloads and change scripts (the inputs
// "sparsesync bench" compares the tools on), at the size the
// -workload-scale flag sets. It registers that flag in every test binary
// that imports it.
package benchtest
