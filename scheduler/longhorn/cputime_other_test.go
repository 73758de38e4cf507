//go:build !unix

package longhorn

import "time"

// processCPU is not measured here: the cpu-ms/op figure reads 0.
func processCPU() time.Duration { return 0 }
