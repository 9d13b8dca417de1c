package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// MinSessionKeyBytes is the shortest session key the status page's sign-in accepts.
const MinSessionKeyBytes = 32

// ErrBadSession is a cookie that is not one this App sealed with its key, or has expired.
var ErrBadSession = errors.New("no valid session")

// Cookie names. The sealed value of each is bound to its name, so that one cannot stand in for the
// other.
const (
	SessionCookie = "latestwins_session"
	signinCookie  = "latestwins_signin"
)

// session is a signed-in user, carried in a cookie sealed with AES-GCM (the user's GitHub token is
// in it: the cookie is encrypted, not only signed). ID is random per sign-in; the CSRF token of the
// session's forms is derived from it.
type session struct {
	Login   string    `json:"login"`
	Token   string    `json:"token"`
	ID      string    `json:"id"`
	Expires time.Time `json:"exp"`
}

// signinState is a sign-in in progress, carried in its own short-lived sealed cookie: the state
// sent to GitHub and expected back.
type signinState struct {
	State   string    `json:"state"`
	Expires time.Time `json:"exp"`
}

// sealer seals and opens cookie values, and derives CSRF tokens, from the session key. Separate
// keys are derived for each use, so that the key itself is never used twice.
type sealer struct {
	aead    cipher.AEAD
	csrfKey []byte
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) < MinSessionKeyBytes {
		return nil, fmt.Errorf("session key of %d bytes: %w", len(key), errShortKey)
	}
	block, err := aes.NewCipher(derive(key, "latestwins cookie seal v1"))
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	return &sealer{aead: aead, csrfKey: derive(key, "latestwins csrf v1")}, nil
}

var errShortKey = fmt.Errorf("give at least %d random bytes (openssl rand -base64 48)", MinSessionKeyBytes)

// derive is HMAC-SHA256(key, purpose): a 32-byte key for one purpose.
func derive(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// seal encrypts and authenticates v as JSON, bound to name: base64url(nonce || ciphertext).
func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", name, err)
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("nonce for %s: %w", name, err)
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// open reverses seal. Any change to the value, another key or another name is ErrBadSession.
func (s *sealer) open(name, value string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return ErrBadSession
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(name))
	if err != nil {
		return ErrBadSession
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return ErrBadSession
	}
	return nil
}

// openSession opens a session cookie's value and checks its expiry against now.
func (s *sealer) openSession(value string, now time.Time) (*session, error) {
	var sess session
	if err := s.open(SessionCookie, value, &sess); err != nil {
		return nil, err
	}
	if sess.Login == "" || sess.Token == "" || sess.ID == "" || !now.Before(sess.Expires) {
		return nil, ErrBadSession
	}
	return &sess, nil
}

// csrf is the token a session's forms carry: HMAC of the session's id, so that it is valid for
// that session only and needs no storage.
func (s *sealer) csrf(sess *session) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte(sess.ID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether token is the session's CSRF token.
func (s *sealer) checkCSRF(sess *session, token string) bool {
	if token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(s.csrf(sess)), []byte(token)) == 1
}

// randomToken is n random bytes, base64url.
func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
