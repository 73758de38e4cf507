package bench

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/require"
)

// spin burns CPU for d of wall time, in a few distinct functions, so the
// profile has stacks of more than one frame.
//
//go:noinline
func spin(d time.Duration) uint64 {
	var x uint64 = 1
	for start := time.Now(); time.Since(start) < d; {
		x = spinInner(x)
	}
	return x
}

//go:noinline
func spinInner(x uint64) uint64 {
	for range 50_000 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// cpuProfileBytes records a real CPU profile (gzip-compressed, as
// runtime/pprof writes it).
func cpuProfileBytes(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, pprof.StartCPUProfile(&buf))
	spin(200 * time.Millisecond)
	pprof.StopCPUProfile()
	return buf.Bytes()
}

// TestParseCPUProfileMatchesPprof decodes a real CPU profile, compressed
// and not, and compares every sample (values and function-name stacks) and
// the sample types with what github.com/google/pprof/profile reads.
func TestParseCPUProfileMatchesPprof(t *testing.T) {
	raw := cpuProfileBytes(t)
	want, err := profile.Parse(bytes.NewReader(raw))
	require.NoError(t, err)
	require.NotEmpty(t, want.Sample)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	for name, b := range map[string][]byte{"gzip": raw, "plain": plain} {
		t.Run(name, func(t *testing.T) {
			got, err := parseCPUProfile(bytes.NewReader(b))
			require.NoError(t, err)
			require.Len(t, got.sampleTypes, len(want.SampleType))
			for i, st := range want.SampleType {
				require.Equal(t, valueType{st.Type, st.Unit}, got.sampleTypes[i])
			}
			require.Len(t, got.samples, len(want.Sample))
			for i, ws := range want.Sample {
				gs := got.samples[i]
				require.Equal(t, ws.Value, gs.values, "sample %d", i)
				var wantStack, gotStack []string
				for _, loc := range ws.Location {
					for _, line := range loc.Line {
						wantStack = append(wantStack, line.Function.Name)
					}
				}
				for _, loc := range gs.locations {
					for _, fn := range got.funcs[loc] {
						gotStack = append(gotStack, got.names[fn])
					}
				}
				require.Equal(t, wantStack, gotStack, "sample %d", i)
			}
		})
	}
}

// TestParseCPUProfileTruncated: every prefix of a profile and a few
// corruptions either decode or fail with errProfile; none panics.
func TestParseCPUProfileTruncated(t *testing.T) {
	raw := cpuProfileBytes(t)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	failed := 0
	for n := 0; n < len(plain); n += 1 + n/64 {
		if _, err := decodeProfile(plain[:n]); err != nil {
			require.ErrorIs(t, err, errProfile, "prefix of %d bytes", n)
			failed++
		}
	}
	require.Positive(t, failed, "no prefix was refused")
	for _, bad := range [][]byte{{0xff}, {0x0a, 0x80}, {0x0b}, {0x32, 0x05, 0x0a, 0x01}} {
		_, err := decodeProfile(bad)
		require.True(t, errors.Is(err, errProfile), "%x: %v", bad, err)
	}
	_, err = parseCPUProfile(bytes.NewReader(raw[:len(raw)/2]))
	require.ErrorIs(t, err, errProfile, "a truncated gzip stream")
}
