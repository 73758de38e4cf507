package tcpsync

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWeakTokensRefused is issue 23's lower-severity item: a token that is
// long enough but not random is refused, with the rule it breaks in the
// message (and never its bytes).
func TestWeakTokensRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 1))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	randomish := func(n int) string { // random base64 characters, as openssl rand -base64 makes
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	half := randomish(16)
	// Ten symbols with no run and no repeat: only the variety rule applies.
	few := strings.Map(func(c rune) rune { return rune("gjlnprtvxz"[c-'0']) },
		"0275318649"+"5270681394"+"1836402759"+"9416273058")
	for _, c := range []struct{ content, rule string }{
		{"abcdefghijklmnop" + "abcdefghijklmnop", "counting up"}, // the report's token
		{half + half, "occurs twice"},
		{randomish(20) + "Password" + randomish(12), `"password"`},
		{randomish(14) + "zzzzz" + randomish(14), "the same byte"},
		{randomish(14) + "97654" + "3" + randomish(14), "counting down"},
		{few, "distinct byte values"},
	} {
		p := filepath.Join(t.TempDir(), "tok")
		require.NoError(t, os.WriteFile(p, []byte(c.content+"\n"), 0o600))
		_, err := LoadToken(p)
		require.ErrorIs(t, err, ErrTokenFile, c.content)
		require.ErrorContains(t, err, c.rule, c.content)
		require.NotContains(t, err.Error(), c.content, "the token must not be echoed")
	}
	// Random tokens of the usual kinds pass.
	for range 200 {
		p := filepath.Join(t.TempDir(), "tok")
		for _, tok := range []string{NewToken(), randomish(44)} {
			require.NoError(t, os.WriteFile(p, []byte(tok), 0o600))
			_, err := LoadToken(p)
			require.NoError(t, err, tok)
		}
	}
}

// TestTokenFileFIFO is hole 5: a FIFO given as the token file is refused
// at once (it used to block the open waiting for a writer, and SIGTERM did
// not end the process).
func TestTokenFileFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(p, 0o600))
	done := make(chan error, 1)
	go func() {
		_, err := LoadToken(p)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrTokenFile)
		require.ErrorContains(t, err, "not a regular file")
		require.True(t, strings.Contains(err.Error(), p))
	case <-time.After(10 * time.Second):
		// Unblock the open so the goroutine ends, then fail.
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("LoadToken blocked on a FIFO")
	}
}
