package gitref

import (
	"strings"
	"testing"
)

func TestRefNames(t *testing.T) {
	t.Parallel()
	keys := []string{"env#staging", "env#preview/pr-7", "env#Staging", "env#a.lock", "env#..", "env#@{x}", "env#a b~c^d:e?f*g[h\\",
		"lease#refresh: config of example/app#main ✓", "intent#prod#push-AbC_1", "env#_2f", "env#-", "env#" + strings.Repeat("x", 300),
		"env#" + strings.Repeat("y", 300)}
	seen := map[string]string{}
	for _, k := range keys {
		enc, err := encodeName(k)
		if err != nil {
			t.Fatalf("encodeName(%q): %v", k, err)
		}
		if len(enc) > maxComponent+len(hashMark)+64 || strings.ToLower(enc) != enc || strings.Trim(enc, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			t.Errorf("encodeName(%q) = %q: not a short lower-case [a-z0-9_-] component", k, enc)
		}
		if other, dup := seen[strings.ToLower(enc)]; dup {
			t.Errorf("%q and %q share the ref name %q", k, other, enc)
		}
		seen[strings.ToLower(enc)] = k
		if len(escape(k)) <= maxComponent {
			if back, err := decodeName(enc); err != nil || back != k {
				t.Errorf("decodeName(encodeName(%q)) = %q, %v", k, back, err)
			}
		} else if _, err := decodeName(enc); err != errHashed {
			t.Errorf("decodeName of the long key %q = %v, want errHashed", k, err)
		}
	}
	for _, bad := range []string{"", "_", "a_zz", "a_6", "_61", "A", "a.b"} {
		if k, err := decodeName(bad); err == nil {
			t.Errorf("decodeName(%q) = %q, want an error", bad, k)
		}
	}
}

// TestRefNamesAreValidForGit asks git itself whether every encoded name makes a valid ref.
func TestRefNamesAreValidForGit(t *testing.T) {
	t.Parallel()
	needGit(t)
	for _, k := range []string{"env#a.lock", "env#..", "env#@{x}", "env#.x", "env#a//b", "env#x.", "env#" + strings.Repeat("é", 100)} {
		ref, err := docRef(k)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec("git", "check-ref-format", ref.String()); err != nil {
			t.Errorf("git check-ref-format %s (key %q): %v %s", ref, k, err, out)
		}
	}
}

func FuzzRefName(f *testing.F) {
	for _, s := range []string{"env#staging", "env#a/b", "x", "_", "ÿ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		enc, err := encodeName(k)
		if k == "" {
			if err == nil {
				t.Fatal("empty key encoded")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Trim(enc, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			t.Fatalf("encodeName(%q) = %q", k, enc)
		}
		back, err := decodeName(enc)
		if len(escape(k)) > maxComponent {
			if err != errHashed {
				t.Fatalf("long key: %v", err)
			}
			return
		}
		if err != nil || back != k {
			t.Fatalf("round trip of %q: %q, %v", k, back, err)
		}
	})
}
