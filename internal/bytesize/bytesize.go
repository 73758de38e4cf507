package bytesize

import "fmt"

// Format renders n in binary units: whole bytes below 1 KiB, else one
// decimal of the largest unit (KiB to EiB) that keeps the number at least 1.
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit && exp < 5; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
