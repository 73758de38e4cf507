package disks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// AgentDir is the directory the agent keeps beneath each disk path. New
// creates it on every disk and it stays, empty between moves, so that a
// disk that fills up later still has it: on a full disk (XFS refuses even
// a directory then) a move needs no new directory. A move's target holds
// AgentDir/<id> with the record and the copy being made (the target has
// room by construction); its source holds, once retired, the source
// replica directory as AgentDir/RetiredPrefix<id>, a rename into this
// nearly empty directory that needs no space. Its name starts with a dot,
// so it is never taken for a replica directory (by the agent or by
// Longhorn, which looks for replica directories by name, one level deep).
const AgentDir = ".sparsesync-disks"

// IntentFile is the move record inside AgentDir/<id>/ on the target disk.
const IntentFile = "intent.json"

// RetiredPrefix starts the name, inside the source disk's AgentDir, of a
// source replica directory retired by move <id>: RetiredPrefix + id.
const RetiredPrefix = "retired."

// Phases of a move record.
const (
	// PhaseCopy: the source is authoritative; recovery rolls back.
	PhaseCopy = "copy"
	// PhaseCommit: the verified copy is authoritative; recovery rolls
	// forward.
	PhaseCommit = "commit"
)

// intentVersion is the record's format. Version 1 (agents before the
// record moved to the target disk) kept the record, hard links and the
// retired source on the source disk; this agent refuses such a record
// rather than guess (see readIntent).
const intentVersion = 2

// stagingName is Rebuild's target inside the move's directory.
const stagingName = "new"

// intent is the move record, written and synced on the target disk before
// the first byte is copied and rewritten once, when the move commits.
type intent struct {
	Version  int       `json:"version"`
	ID       string    `json:"id"`
	Phase    string    `json:"phase"`
	Replica  string    `json:"replica"` // directory name, the same on both disks
	Volume   string    `json:"volume"`
	From     string    `json:"from"`      // source disk name
	FromPath string    `json:"from_path"` // source disk path when written
	To       string    `json:"to"`        // target disk name (the disk holding the record)
	ToPath   string    `json:"to_path"`   // target disk path when written (for the operator)
	Size     int64     `json:"size"`      // the replica's volume size
	Bytes    int64     `json:"bytes"`     // its allocated bytes
	Created  time.Time `json:"created"`
}

// movePaths are the paths one move uses.
type movePaths struct {
	src, dst         string // the replica's home on the source and target disk
	retired          string // <source disk>/AgentDir/RetiredPrefix<id>
	agent            string // <target disk>/AgentDir
	moveDir, staging string // AgentDir/<id> (holds the record) and its staging copy
	fromDisk, toDisk string
}

func pathsOf(in *intent, from, to DiskConfig) movePaths {
	p := movePaths{
		src: filepath.Join(from.Path, in.Replica), dst: filepath.Join(to.Path, in.Replica),
		retired:  filepath.Join(from.Path, AgentDir, RetiredPrefix+in.ID),
		agent:    filepath.Join(to.Path, AgentDir),
		fromDisk: from.Path, toDisk: to.Path,
	}
	p.moveDir = filepath.Join(p.agent, in.ID)
	p.staging = filepath.Join(p.moveDir, stagingName)
	return p
}

func newID(replicaName string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return replicaName + "." + hex.EncodeToString(b)
}

// writeIntent replaces dir/intent.json: temporary file, fsync, rename,
// fsync of dir. When it returns nil the record survives a power loss.
func writeIntent(dir string, in *intent) error {
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, IntentFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, IntentFile))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func readIntent(path string) (*intent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var in intent
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%s: %w: not a move record: %v", path, ErrRecovery, err)
	}
	if in.Version == 1 {
		return nil, fmt.Errorf("%s: %w: a version 1 move record (an earlier agent, which kept it on the source disk); finish the move with that agent", path, ErrRecovery)
	}
	if in.Version != intentVersion || in.ID == "" || in.Replica == "" || filepath.Base(in.Replica) != in.Replica ||
		in.ID != filepath.Base(filepath.Dir(path)) || (in.Phase != PhaseCopy && in.Phase != PhaseCommit) {
		return nil, fmt.Errorf("%s: %w: malformed move record", path, ErrRecovery)
	}
	return &in, nil
}

// syncDir fsyncs a directory, making the entries created, renamed or
// removed in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdirSynced creates dir (its parent must exist or be parent's AgentDir)
// and makes the new entries durable.
func mkdirSynced(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.Mkdir(parent, 0o700); err == nil {
		if err := syncDir(filepath.Dir(parent)); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return syncDir(parent)
}

// ensureAgentDir creates AgentDir beneath disk if it is not there and
// makes it durable.
func ensureAgentDir(disk string) error {
	err := os.Mkdir(filepath.Join(disk, AgentDir), 0o700)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(disk)
}

func exists(p string) (bool, error) {
	_, err := os.Lstat(p)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
