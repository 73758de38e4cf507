// Package bytesize writes and reads byte counts for people, in binary units
// ("512 B", "1.5 KiB", "8.0 MiB"), the same way in every message (the
// CLI's reports and progress, the disks agent's events and the benchmark
// reports), and the one parser of the sizes people type (Parse).
package bytesize
