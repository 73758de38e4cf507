package tcpsync

import "fmt"

// SetToken replaces the token that connections accepted from now on must
// prove (serve reloads its token file on SIGHUP); sessions already
// authenticated go on. It refuses a token shorter than MinTokenLen and
// keeps the old one.
func (s *Server) SetToken(tok []byte) error {
	if len(tok) < MinTokenLen {
		return fmt.Errorf("%w: token of %d bytes, need at least %d", ErrTokenFile, len(tok), MinTokenLen)
	}
	s.mu.Lock()
	s.Token = tok
	s.mu.Unlock()
	return nil
}

// token is the token a new connection must prove.
func (s *Server) token() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Token
}
