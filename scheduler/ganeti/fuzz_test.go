package ganeti

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadText: the text reader never panics, and whatever it accepts can
// be loaded, scored, balanced and squeezed without panicking.
func FuzzReadText(f *testing.F) {
	files, _ := filepath.Glob("testdata/ganeti/*.data")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		c, err := ReadText(bytes.NewReader(data), "fuzz.data")
		if err != nil {
			return
		}
		s, err := Load(c)
		if err != nil {
			return
		}
		_ = s.Score()
		if len(c.Nodes) > 8 || len(c.Instances) > 16 {
			return
		}
		o := DefaultBalanceOptions()
		o.MaxRounds = 5
		if len(c.Groups) > 1 {
			o.Group = c.Groups[0].Name
		}
		_, _ = Balance(c, o)
		_, _ = Squeeze(c, &SqueezeOptions{Moves: MoveAll})
		// What was read can be written and read back.
		var buf bytes.Buffer
		if err := WriteText(&buf, c); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadText(&buf, "again.data"); err != nil {
			t.Fatalf("re-reading written cluster: %v\n%s", err, buf.String())
		}
	})
}
