package tcpsync

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"syscall"
)

// Token rules. A token is a secret only if it was drawn at random; these
// rules turn away what a person types or a file that is not a token. They
// are tuned so that NewToken's output, and 32 or more random base64 or
// printable characters, fail with a probability below 10^-4.
const (
	// minTokenDistinct is the least number of distinct byte values of a
	// token, whatever its length (32 random bytes have about 30, 32 random
	// base64 characters about 25).
	minTokenDistinct = 12
	// maxTokenRun is the longest run a token may hold: the same byte, or
	// bytes counting up or down by one ("aaaaa", "abcde", "98765").
	maxTokenRun = 4
	// tokenRepeat is the length of a sequence that must not occur twice
	// in a token ("abcdefghijklmnop" twice, "abab…").
	tokenRepeat = 8
)

// tokenWords are words (and names of this software) that a random token
// contains with negligible probability, and a chosen one often does.
// Five letters at least: 44 random base64 characters contain one of
// these with a probability of about 3·10^-5.
var tokenWords = []string{
	"password", "passwd", "secret", "token", "admin", "changeme", "letmein", "welcome", "qwerty", "asdfg",
	"default", "example", "sample", "dummy", "hello", "guest", "master", "login", "sparse", "longhorn",
	"replica", "backup", "server", "client", "private", "shared",
}

// LoadToken reads a pre-shared token from path. The file is opened without
// blocking (a FIFO or a device would otherwise hang the open) and must be
// a regular file not readable or writable by group or others, owned by us
// or root, and hold either a hex-encoded token (what NewToken makes) or
// printable ASCII without white space inside; surrounding white space is
// ignored. The token must have at least MinTokenLen bytes and look random
// (weakToken): the error names the rule it breaks, never its bytes.
func LoadToken(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrTokenFile, path)
	}
	if p := st.Mode().Perm(); p&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o, must not be accessible by group or others (chmod 600)", ErrTokenFile, path, p)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%w: %s is owned by uid %d, not by us or root", ErrTokenFile, path, sys.Uid)
	}
	b := make([]byte, 4097)
	n, _ := f.Read(b)
	if n > 4096 {
		return nil, fmt.Errorf("%w: %s is larger than 4 KiB", ErrTokenFile, path)
	}
	tok := bytes.TrimSpace(b[:n])
	if d, err := hex.DecodeString(string(tok)); err == nil {
		tok = d
	} else {
		for _, c := range tok {
			if c <= ' ' || c >= 0x7f {
				return nil, fmt.Errorf("%w: %s holds a byte %#02x: want hex or printable ASCII without spaces", ErrTokenFile, path, c)
			}
		}
	}
	if len(tok) < MinTokenLen {
		return nil, fmt.Errorf("%w: %s holds %d bytes, need at least %d random bytes", ErrTokenFile, path, len(tok), MinTokenLen)
	}
	if why := weakToken(tok); why != "" {
		return nil, fmt.Errorf("%w: %s is not a random token: %s (make one with: openssl rand -hex 32)", ErrTokenFile, path, why)
	}
	return tok, nil
}

// weakToken returns the rule tok breaks, or "" when it looks random:
// enough distinct bytes for its length (at least half of them up to 64
// bytes, and minTokenDistinct), no run longer than maxTokenRun, no
// sequence of tokenRepeat bytes twice, no word of tokenWords.
func weakToken(tok []byte) string {
	var seen [256]bool
	distinct := 0
	for _, c := range tok {
		if !seen[c] {
			seen[c] = true
			distinct++
		}
	}
	if want := max(minTokenDistinct, min(len(tok), 64)/2); distinct < want {
		return fmt.Sprintf("only %d distinct byte values in %d bytes, need at least %d", distinct, len(tok), want)
	}
	for _, step := range []int{0, 1, -1} {
		run := 1
		for i := 1; i < len(tok); i++ {
			if int(tok[i])-int(tok[i-1]) == step {
				run++
			} else {
				run = 1
			}
			if run > maxTokenRun {
				what := map[int]string{0: "the same byte", 1: "bytes counting up", -1: "bytes counting down"}[step]
				return fmt.Sprintf("a run of %d or more %s", maxTokenRun+1, what)
			}
		}
	}
	seq := map[string]bool{}
	for i := 0; i+tokenRepeat <= len(tok); i++ {
		s := string(tok[i : i+tokenRepeat])
		if seq[s] {
			return fmt.Sprintf("a sequence of %d bytes that occurs twice (a repeated pattern)", tokenRepeat)
		}
		seq[s] = true
	}
	low := bytes.ToLower(tok)
	for _, w := range tokenWords {
		if bytes.Contains(low, []byte(w)) {
			return fmt.Sprintf("the dictionary word %q", w)
		}
	}
	return ""
}

// NewToken returns 32 random bytes, hex-encoded, to store in a 0600 token file.
func NewToken() string {
	for {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		if weakToken(b) == "" { // never, or once in 10^9 draws
			return hex.EncodeToString(b)
		}
	}
}
