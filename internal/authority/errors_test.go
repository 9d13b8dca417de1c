package authority

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestErrorCategories(t *testing.T) {
	cases := []struct {
		err      error
		category error
		says     []string
	}{
		{&SupersededError{Environment: "staging", Scope: "api", Generation: 7, By: 9, BySha: "abcdef0123456789"}, ErrSuperseded,
			[]string{"staging/api", "generation 7", "generation 9", "(abcdef0)"}},
		{&SupersededError{Environment: "staging", Scope: "api", Generation: 7, By: 9}, ErrSuperseded, []string{"generation 9"}},
		{&HeldError{Resource: "staging/api", Holder: "run-12/1", Purpose: "deploy", Generation: 9, RetryAfter: 42 * time.Second}, ErrLeaseHeld,
			[]string{"staging/api", "run-12/1", "deploy", "generation 9", "42s"}},
		{&LostError{Resource: "staging/api", Token: 3, Holder: "run-13/1", Current: 4, Reason: "taken over"}, ErrLeaseLost,
			[]string{"staging/api", "token 3", "taken over", "run-13/1", "token 4"}},
		{&InputError{Field: "environment", Value: "a//b", Fix: "use a valid name"}, ErrInvalidInput, []string{"environment", `"a//b"`, "use a valid name"}},
		{&InputError{Field: "reason", Fix: "say why"}, ErrInvalidInput, []string{"invalid reason: say why"}},
		{&FreezeMismatchError{Environment: "prod", Scope: "api", Named: 3, Current: &Freeze{Generation: 5, Sha: "abcdef0123456789", Actor: "oncall", Reason: "B breaks checkout"}},
			ErrFreezeMismatch, []string{"freeze 3 is not the current freeze of prod/api (a newer rollback has frozen the scope since): it is frozen by freeze 5 (the rollback to abcdef0 by oncall: B breaks checkout)",
				"name that one (5)", "nothing was unfrozen"}},
		{&FreezeMismatchError{Environment: "prod", Scope: "api", Named: 8, Current: &Freeze{Generation: 5, Sha: "abcdef0123456789", Reason: "r"}},
			ErrFreezeMismatch, []string{"freeze 8 is not the current freeze of prod/api (no rollback set it)", "frozen by freeze 5"}},
		{&FreezeMismatchError{Environment: "prod", Scope: "api", Current: &Freeze{Generation: 5, Sha: "abcdef0123456789", Reason: "r"}},
			ErrFreezeMismatch, []string{"no freeze was named, and prod/api is frozen by freeze 5 (the rollback to abcdef0 by unknown: r): name it (5) to lift it"}},
	}
	all := []error{ErrSuperseded, ErrLeaseHeld, ErrLeaseLost, ErrInvalidInput, ErrNotFound, ErrConflict, ErrFreezeMismatch}
	for _, c := range cases {
		wrapped := fmt.Errorf("gate deploy in staging: %w", c.err)
		for _, cat := range all {
			if got := errors.Is(wrapped, cat); got != (cat == c.category) {
				t.Errorf("errors.Is(%v, %v) = %v", c.err, cat, got)
			}
		}
		for _, s := range c.says {
			if !strings.Contains(c.err.Error(), s) {
				t.Errorf("%q does not say %q", c.err.Error(), s)
			}
		}
	}
}

// A pass that never claimed a scope is told so, not "superseded by generation 0".
func TestSupersededErrorWithoutANewerGeneration(t *testing.T) {
	got := (&SupersededError{Environment: "staging", Scope: "api", Generation: 4}).Error()
	if strings.Contains(got, "generation 0") || !strings.Contains(got, "never claimed") {
		t.Errorf("message %q; want it to say the pass never claimed the scope", got)
	}
}
