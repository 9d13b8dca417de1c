package gitref

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Namespace is the ref prefix under which the Store keeps all its state; it never touches branches
// or tags.
const Namespace = "refs/latestwins/"

// The four kinds of refs: one per document, one marker per environment with pending work, one
// per group of records (an environment's events and intents), one per counter.
const (
	docsPrefix     = Namespace + "docs/"
	pendingPrefix  = Namespace + "pending/"
	recordsPrefix  = Namespace + "records/"
	countersPrefix = Namespace + "counters/"
)

// maxComponent bounds an encoded name: a ref is a file on most servers, and file names stop at 255
// bytes. A longer encoding keeps its first keptPrefix bytes and ends with hashMark and the
// SHA-256 of the key.
const (
	maxComponent = 160
	keptPrefix   = 90
	hashMark     = "_h"
)

// encodeName turns a key into one ref name component. Lower-case letters, digits and '-' stand for
// themselves; every other byte becomes '_' and two lower-case hex digits. The result is made of
// [a-z0-9_-] only, so it is a valid component whatever the key holds ('#', '/', '.', spaces,
// "@{", ".lock"), two keys never share it (the escape is decoded left to right without choice),
// and two results never differ only in case, so a case-insensitive file system on the server
// cannot merge two refs. A key whose encoding is longer than maxComponent is named by its hash
// (hashMark cannot appear in an escape), so two long keys collide only if SHA-256 does.
func encodeName(key string) (string, error) {
	if key == "" {
		return "", errors.New("empty key")
	}
	s := escape(key)
	if len(s) <= maxComponent {
		return s, nil
	}
	// Cut at an escape's start, so the kept part reads as the key's beginning.
	cut := keptPrefix
	for cut > 0 && (s[cut-1] == '_' || cut >= 2 && s[cut-2] == '_') {
		cut--
	}
	sum := sha256.Sum256([]byte(key))
	return s[:cut] + hashMark + hex.EncodeToString(sum[:]), nil
}

// errHashed: the name is a long key's, which holds the key's hash, not the key.
var errHashed = errors.New("the ref name of a long key holds its hash")

// escape is encodeName without its bound: tree entry names (of records) are no files.
func escape(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

// decodeName is encodeName's inverse; it refuses what encodeName cannot have written.
func decodeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		case strings.HasPrefix(s[i:], hashMark):
			return "", errHashed
		case c == '_' && i+2 < len(s):
			hi, lo := unhex(s[i+1]), unhex(s[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("ref name %q: bad escape at %d", s, i)
			}
			e := byte(hi<<4 | lo)
			if e >= 'a' && e <= 'z' || e >= '0' && e <= '9' || e == '-' {
				return "", fmt.Errorf("ref name %q: %q is escaped but needs no escape", s, e)
			}
			b.WriteByte(e)
			i += 2
		default:
			return "", fmt.Errorf("ref name %q: unexpected %q at %d", s, c, i)
		}
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("ref name %q: empty", s)
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

func docRef(key string) (plumbing.ReferenceName, error) {
	n, err := encodeName(key)
	return plumbing.ReferenceName(docsPrefix + n), err
}

func counterRef(key string) (plumbing.ReferenceName, error) {
	n, err := encodeName(key)
	return plumbing.ReferenceName(countersPrefix + n), err
}

func pendingRef(env string) (plumbing.ReferenceName, error) {
	n, err := encodeName(env)
	return plumbing.ReferenceName(pendingPrefix + n), err
}

// noGroup names the records whose key names no environment; '_' alone is no encoding of a key.
const noGroup = "_"

// recordGroup is the environment a record key belongs to ("event#ENV#SEQ", "intent#ENV#ID"), or ""
// when the key has no such part.
func recordGroup(key string) string {
	_, rest, ok := strings.Cut(key, "#")
	if !ok {
		return ""
	}
	env, _, ok := strings.Cut(rest, "#")
	if !ok {
		return ""
	}
	return env
}

func recordsRef(group string) (plumbing.ReferenceName, error) {
	if group == "" {
		return plumbing.ReferenceName(recordsPrefix + noGroup), nil
	}
	n, err := encodeName(group)
	return plumbing.ReferenceName(recordsPrefix + n), err
}
