package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// A document edited by hand is below the Store port: each adapter's test writes it in its own raw
// form (SeedForHandEdit, then HandEdit on the stored bytes) and checks with CheckHandEditRefused
// that reading it, through the adapter and through an Authority, refuses it.

// SeedForHandEdit accepts and claims one intent in env through an Authority over st: generation
// 1, observed 0, desired 1.
func SeedForHandEdit(t *testing.T, st authority.Store, env string) {
	t.Helper()
	a := authority.New(st)
	in := authority.Intent{ID: "before-the-edit", Environment: env, Scopes: []string{"api"}, Sha: sha("e", 1), Ref: "refs/heads/main"}
	if res, err := a.Accept(t.Context(), in, true); err != nil || res.Generation != 1 {
		t.Fatalf("seed %s: %+v, %v", env, res, err)
	}
}

// HandEdit returns an environment's stored form (authority.EncodeEnv's, or a whole document of
// authority.EncodeDoc's holding one) with observed set to 50 and desired to 1, as a hand edit
// leaves it: it reads as "50/1 settled", and the next claim would hand out generation 2 again.
func HandEdit(t *testing.T, stored []byte) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(stored))
	dec.UseNumber() // the rest as it was, to the digit
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("hand edit: %v", err)
	}
	env := m
	if inner, ok := m["env"].(map[string]any); ok {
		env = inner
	}
	if _, ok := env["d"]; !ok {
		t.Fatalf("hand edit: %s is not an environment's stored form", stored)
	}
	env["o"], env["d"] = 50, 1
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("hand edit: %v", err)
	}
	return b
}

// CheckHandEditRefused checks that st, whose document of env a hand edit left at observed 50 and
// desired 1, refuses it: its Get fails with a *authority.CorruptError naming the document and the
// invariant, and an Authority over it (another process, nothing remembered) hands out no
// generation to a claim, shows the error in status, and writes nothing: raw returns the stored
// bytes before and after.
func CheckHandEditRefused(t *testing.T, st authority.Store, env string, raw func() []byte) {
	t.Helper()
	ctx := t.Context()
	key := authority.EnvKey(env)
	before := raw()
	want := func(what string, err error) {
		t.Helper()
		ce, ok := errors.AsType[*authority.CorruptError](err)
		if !ok || !errors.Is(err, authority.ErrCorrupt) || ce.Key != key || ce.Invariant != authority.InvariantObserved {
			t.Fatalf("%s of the edited %s: %v; want a *CorruptError of %s naming %q", what, env, err, key, authority.InvariantObserved)
		}
	}
	d, err := st.Get(ctx, key)
	if d != nil {
		t.Fatalf("Get of the edited %s returned a document: %+v", env, d.Env)
	}
	want("Get", err)
	a := authority.New(st)
	res, err := a.Accept(ctx, authority.Intent{ID: "after-the-edit", Environment: env, Scopes: []string{"api"}, Sha: sha("e", 2), Ref: "refs/heads/main"}, true)
	if res != nil {
		t.Fatalf("a claim on the edited %s was handed generation %d", env, res.Generation)
	}
	want("claim", err)
	_, err = a.Claim(ctx, env, 1, nil)
	want("claim of pending scopes", err)
	_, err = a.Status(ctx, env)
	want("status", err)
	if after := raw(); !bytes.Equal(before, after) {
		t.Fatalf("the edited %s was written over:\n%s\nnow\n%s", env, before, after)
	}
}
