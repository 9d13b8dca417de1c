package web

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var testSessionKey = []byte("0123456789abcdef0123456789abcdef-test")

func TestSessionCookie(t *testing.T) {
	t.Parallel()
	s, err := newSealer(testSessionKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	in := session{Login: "mona", Token: "ghu_secret", ID: "id-1", Expires: now.Add(time.Hour)}
	v, err := s.seal(SessionCookie, in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v, "ghu_secret") || strings.Contains(v, "mona") {
		t.Errorf("the cookie shows its content: %s", v)
	}
	got, err := s.openSession(v, now)
	if err != nil || got.Login != "mona" || got.Token != "ghu_secret" {
		t.Fatalf("open: %+v, %v", got, err)
	}
	other, err := newSealer([]byte("another key of at least thirty-two bytes!"))
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte(v)
	raw[len(raw)/2] ^= 'A' ^ 'B'
	if raw[len(raw)/2] == v[len(v)/2] {
		raw[len(raw)/2] = 'A'
	}
	state, _ := s.seal(signinCookie, session{Login: "mona", Token: "t", ID: "i", Expires: now.Add(time.Hour)})
	for name, open := range map[string]func() (*session, error){
		"expired":            func() (*session, error) { return s.openSession(v, now.Add(time.Hour)) },
		"tampered":           func() (*session, error) { return s.openSession(string(raw), now) },
		"wrong key":          func() (*session, error) { return other.openSession(v, now) },
		"another cookie":     func() (*session, error) { return s.openSession(state, now) },
		"empty":              func() (*session, error) { return s.openSession("", now) },
		"truncated":          func() (*session, error) { return s.openSession(v[:10], now) },
		"not base64":         func() (*session, error) { return s.openSession("!!!", now) },
		"extended by a byte": func() (*session, error) { return s.openSession(v+"A", now) },
	} {
		if got, err := open(); !errors.Is(err, ErrBadSession) {
			t.Errorf("%s: %+v, %v; want ErrBadSession", name, got, err)
		}
	}
	if _, err := newSealer(make([]byte, MinSessionKeyBytes-1)); err == nil {
		t.Errorf("a %d-byte key was accepted", MinSessionKeyBytes-1)
	}
}

func TestCSRFToken(t *testing.T) {
	t.Parallel()
	s, _ := newSealer(testSessionKey)
	a, b := &session{ID: "session-a"}, &session{ID: "session-b"}
	if !s.checkCSRF(a, s.csrf(a)) {
		t.Error("a session's own token is refused")
	}
	for name, tok := range map[string]string{"another session's": s.csrf(b), "empty": "", "truncated": s.csrf(a)[:20]} {
		if s.checkCSRF(a, tok) {
			t.Errorf("%s token accepted", name)
		}
	}
}
