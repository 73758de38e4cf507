package fuzz

import (
	"fmt"
	"os"
	"testing"

	"github.com/sparsesync/sparsesync/localsync"
)

// localRun is one combination of localsync options.
type localRun struct {
	opts localsync.Options
}

func (r localRun) String() string {
	return fmt.Sprintf("method=%v bs=%d atomic=%v zeros=%v", r.opts.Method, r.opts.BlockSize, r.opts.Atomic, r.opts.DetectZeros)
}

// localRuns is every method, block size, mode and zero detection that
// makes sense on a filesystem of this kind.
func localRuns(reflink bool) []localRun {
	methods := []localsync.Method{localsync.MethodAuto, localsync.MethodCopyRange, localsync.MethodReadWrite}
	if reflink {
		methods = append(methods, localsync.MethodReflink)
	}
	var out []localRun
	for _, m := range methods {
		for _, bs := range []int64{0, 64 << 10} {
			for _, atomic := range []bool{false, true} {
				for _, zeros := range []bool{false, true} {
					o := localsync.Options{Method: m, BlockSize: bs, Atomic: atomic, DetectZeros: zeros}
					if o.Validate() != nil {
						continue
					}
					out = append(out, localRun{o})
				}
			}
		}
	}
	return out
}

// FuzzLocal runs a case through localsync.Copy with every option set (one,
// chosen by the input, when fuzzing):
// a copy onto the destination (new or existing), an unchanged re-sync that
// must write nothing, and a re-sync after the change script.
func FuzzLocal(f *testing.F) {
	fss := filesystems(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		c := decode(in)
		for _, fs := range fss {
			for _, run := range pick(localRuns(fs.kind.Reflink()), c) {
				localCase(t, fs, c, run)
			}
		}
	})
}

func localCase(t *testing.T, fs fsys, c fcase, run localRun) {
	dir := scratch(t, fs)
	third := makeThird(t, dir)
	src, dst := path(dir, "src"), path(dir, "dst")
	build(t, src, c.Size, c.Src, third)
	if c.HasDst {
		build(t, dst, c.DstSize, c.Dst, third)
	}
	what := func(step string) string { return fmt.Sprintf("%s %s %v\n\tcase %v", fs.kind, step, run, c) }
	rules := rules{keepData: !run.opts.DetectZeros}
	ctx := t.Context()

	if _, err := localsync.Copy(ctx, src, dst, &run.opts); err != nil {
		t.Fatalf("%s: %v", what("copy"), err)
	}
	checkResult(t, what("copy"), src, dst, rules)

	// An unchanged re-sync in place writes nothing.
	if !run.opts.Atomic {
		markUntouched(t, dst)
		st, err := localsync.Copy(ctx, src, dst, &run.opts)
		if err != nil {
			t.Fatalf("%s: %v", what("unchanged re-sync"), err)
		}
		if w := st.ClonedBytes + st.CopiedBytes + st.PunchedBytes + st.ZeroedBytes; w != 0 || touched(t, dst) {
			t.Fatalf("%s: an unchanged re-sync wrote (stats %+v, mtime moved %v)", what("unchanged re-sync"), st, touched(t, dst))
		}
		checkResult(t, what("unchanged re-sync"), src, dst, rules)
	}

	if len(c.Change) > 0 {
		change(t, src, c.Change, third)
		if _, err := localsync.Copy(ctx, src, dst, &run.opts); err != nil {
			t.Fatalf("%s: %v", what("re-sync after change"), err)
		}
		checkResult(t, what("re-sync after change"), src, dst, rules)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}
