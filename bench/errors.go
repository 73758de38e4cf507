package bench

import "errors"

// Errors of a benchmark configuration.
var (
	// ErrUnknownWorkload: a workload name not in Workloads.
	ErrUnknownWorkload = errors.New("bench: unknown workload")
	// ErrUnknownChange: a change script name not in Changes.
	ErrUnknownChange = errors.New("bench: unknown change script")
	// ErrUnknownPeer: a peer name not in Peers.
	ErrUnknownPeer = errors.New("bench: unknown peer")
	// ErrNoSparsesync: Config.Sparsesync is nil; there is nothing to compare.
	ErrNoSparsesync = errors.New("bench: no sparsesync command configured")
	// ErrTreeTooBig: the vm-image workload's tree cannot fit in the image
	// at this scale (mkfs.ext4 -d would fail after minutes of work).
	ErrTreeTooBig = errors.New("bench: tree too big for the vm-image workload")
	// ErrInvalidOptions: options that cannot be used (GenOptions,
	// WriteBenchOptions); the error names the field.
	ErrInvalidOptions = errors.New("bench: invalid options")
	// ErrResultDiffers: a tool's target does not have the source's bytes.
	ErrResultDiffers = errors.New("bench: target differs from the source")
)
