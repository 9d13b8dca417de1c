package authority

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Commit is a commit that was live in a scope: its sha, and its ref while the scope's state still
// holds it (what is live now, and what was live before).
type Commit struct {
	Sha string `json:"sha"`
	Ref string `json:"ref,omitempty"`
}

// ResolveEvents is how many of an environment's newest events ResolveCommit reads for the commits a
// scope deployed, besides the ones live now and before.
const ResolveEvents = 1000

// AnyCommitHint ends ResolveCommit's refusal of a prefix no commit live in the scope starts with:
// Rollback takes a full sha of any commit. A surface that rolls back only to commits the scope ran
// (the App) leaves it out.
const AnyCommitHint = "; to name another commit, give its full sha"

// maxCandidates bounds the commits an ambiguous prefix's refusal names.
const maxCandidates = 5

// ResolveCommit finds the one commit that was live in scope of env whose sha starts with prefix:
// at least MinShaPrefix lowercase hex digits, or a full sha, which names itself. It looks at what
// is live now, what was live before, and the commits the newest ResolveEvents events of the
// timeline record as deployed there. A sha stored before shas had to be full is among them as it
// was stored, and one equal to prefix is that commit even when longer ones start with it too.
//
// Several matches are an *InputError naming them; none is one saying that no commit with that
// prefix was live there. Rollback names its commit so when it is given a prefix; a surface that may
// roll back only to a commit the scope ran (the App's comment command) asks it of a full sha too.
func (a *Authority) ResolveCommit(ctx context.Context, env, scope, prefix string) (Commit, error) {
	if err := ValidateEnvironment(env); err != nil {
		return Commit{}, err
	}
	if err := ValidateScope(scope); err != nil {
		return Commit{}, err
	}
	if err := ValidateShaPrefix(prefix); err != nil {
		return Commit{}, err
	}
	d, err := a.readEnvScopes(ctx, env, []string{scope})
	if err != nil {
		return Commit{}, fmt.Errorf("resolve %s in %s/%s: %w", prefix, env, scope, err)
	}
	c, err := a.resolve(ctx, d.Env, env, scope, prefix)
	if err != nil {
		return Commit{}, fmt.Errorf("resolve %s in %s/%s: %w", prefix, env, scope, err)
	}
	return c, nil
}

// resolve is ResolveCommit over the environment e as read (nil: nothing was ever accepted for it).
// A refusal is an *InputError; any other error is the store's.
func (a *Authority) resolve(ctx context.Context, e *Env, env, scope, prefix string) (Commit, error) {
	if e == nil {
		return Commit{}, &InputError{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
	}
	if err := e.requireScopes([]string{scope}); err != nil {
		return Commit{}, err
	}
	sc := e.Scopes[scope]
	var found []Commit // newest first, each sha once
	add := func(sha, ref string) {
		if !strings.HasPrefix(sha, prefix) {
			return
		}
		if i := slices.IndexFunc(found, func(c Commit) bool { return c.Sha == sha }); i >= 0 {
			found[i].Ref = cmp.Or(found[i].Ref, ref)
			return
		}
		found = append(found, Commit{Sha: sha, Ref: ref})
	}
	if sc.Live != nil {
		add(sc.Live.Sha, sc.Live.Ref)
	}
	if sc.Prev != nil {
		add(sc.Prev.Sha, sc.Prev.Ref)
	}
	var before int64
	for read := 0; read < ResolveEvents; {
		limit := min(250, ResolveEvents-read) // a page of records at a time
		page, err := a.history(ctx, e, before, limit)
		if err != nil {
			return Commit{}, err
		}
		for _, ev := range slices.Backward(page.Events) {
			if ev.Kind == EventDeployed && ev.Scope == scope {
				add(ev.Sha, "")
			}
		}
		if page.Before == 0 {
			break
		}
		read, before = read+limit, page.Before
	}
	if i := slices.IndexFunc(found, func(c Commit) bool { return c.Sha == prefix }); i >= 0 {
		return found[i], nil
	}
	resource := resourceName(env, scope)
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		fix := fmt.Sprintf("no commit with that prefix was live in %s (live now, live before, or deployed there within its last %d events)", resource, ResolveEvents)
		if ValidateSha(prefix) != nil {
			fix += AnyCommitHint
		}
		return Commit{}, &InputError{Field: "sha", Value: prefix, Fix: fix}
	}
	names := make([]string, 0, maxCandidates)
	for _, c := range found[:min(len(found), maxCandidates)] {
		names = append(names, c.Sha)
	}
	more := ""
	if len(found) > maxCandidates {
		more = fmt.Sprintf(" and %d more", len(found)-maxCandidates)
	}
	return Commit{}, &InputError{Field: "sha", Value: prefix,
		Fix: fmt.Sprintf("it is the start of %d commits that were live in %s (%s%s): give more of it", len(found), resource, strings.Join(names, ", "), more)}
}

// inputError tells a refusal (an *InputError) from a failure to read.
func inputError(err error) bool {
	var in *InputError
	return errors.As(err, &in)
}
