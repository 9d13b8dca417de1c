package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// ReadThese reads the environments named and those with pending work, sorted, each once (nil:
// nothing accepted there yet).
func (a *App) ReadThese(ctx context.Context, configured []string) ([]string, map[string]*authority.Env, error) {
	pending, err := a.Auth.Pending(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := append(slices.Clone(configured), pending...)
	sort.Strings(names)
	names = slices.Compact(names)
	read := make(map[string]*authority.Env, len(names))
	moved := map[string]bool{}
	for _, name := range names {
		env, err := a.Auth.Status(ctx, name)
		switch {
		case errors.Is(err, authority.ErrInvalidInput):
			read[name] = nil
		case errors.Is(err, authority.ErrMoved):
			// Its state went to another store: not this App's to show (the log says where).
			a.Log.WarnContext(ctx, "environment moved to another store", "environment", name, "err", err)
			moved[name] = true
		case err != nil:
			return nil, nil, err
		default:
			read[name] = env
		}
	}
	return slices.DeleteFunc(names, func(n string) bool { return moved[n] }), read, nil
}

// RequiredOf reads the states of the environments e requires (nil entry: nothing accepted there),
// taking those in read (by name) as they are; nil when e requires nothing.
func (a *App) RequiredOf(ctx context.Context, e *authority.Env, read map[string]*authority.Env) (map[string]*authority.Env, error) {
	if e == nil || e.Requires == nil {
		return nil, nil
	}
	out := map[string]*authority.Env{}
	for _, name := range e.Requires.Environments {
		if re, ok := read[name]; ok {
			out[name] = re
			continue
		}
		re, err := a.Auth.Status(ctx, name)
		switch {
		case errors.Is(err, authority.ErrInvalidInput):
			out[name] = nil
		case err != nil:
			return nil, fmt.Errorf("read %s, which %s requires: %w", name, e.Name, err)
		default:
			out[name] = re
		}
	}
	return out, nil
}

// OverviewOf is what is live where across the visible environments of read. A wait for an
// environment that is not visible names it and the commit that waits, but not what is live there.
func OverviewOf(read map[string]*authority.Env, visible map[string]bool, now time.Time) *report.Overview {
	var all []*authority.Env
	for _, e := range read {
		if e != nil {
			all = append(all, e)
		}
	}
	o := report.NewOverview(all, now)
	viewer := report.Viewer(func(env string) bool { return visible[env] })
	out := &report.Overview{Environments: []string{}, Scopes: []report.OverviewScope{}}
	for _, name := range o.Environments {
		if visible[name] {
			out.Environments = append(out.Environments, name)
		}
	}
	for _, s := range o.Scopes {
		kept := report.OverviewScope{Scope: s.Scope}
		for _, p := range s.Places {
			if !visible[p.Environment] {
				continue
			}
			if hidden := viewer.Wait(p.Promotion); hidden != p.Promotion {
				p.Promotion, p.Waiting = hidden, authority.WaitText(&authority.HeldError{Promotion: hidden})
			}
			kept.Places = append(kept.Places, p)
		}
		if len(kept.Places) > 0 {
			out.Scopes = append(out.Scopes, kept)
		}
	}
	return out
}

// RedeployIntent is the intent that deploys scope of env again at its live commit: in, with the live
// commit, its ref and Redeploy set. Accepted for a selection of that scope alone, it changes nothing
// of the other scopes (their live sha, generation, run and time). The comment command and the status
// page's button both make it.
func (a *App) RedeployIntent(ctx context.Context, env, scope string, in authority.Intent) (authority.Intent, error) {
	doc, err := a.Auth.Status(ctx, env)
	if err != nil && !errors.Is(err, authority.ErrInvalidInput) {
		return in, err
	}
	var live *authority.Live
	if doc != nil && doc.Scopes[scope] != nil {
		live = doc.Scopes[scope].Live
	}
	if live == nil {
		return in, fmt.Errorf("%s/%s: %w", env, scope, ErrNothingLive)
	}
	in.Sha, in.Ref, in.Redeploy = live.Sha, live.Ref, true
	return in, nil
}

// ErrNothingLive is a redeploy of a scope with nothing deployed.
var ErrNothingLive = errors.New("nothing live to redeploy")

// AcceptSelection accepts in for one selection and dispatches its scopes' workflows on the intent's
// branch, as installation; isBranch is false when the intent's ref is no branch (then nothing is
// dispatched).
func (a *App) AcceptSelection(ctx context.Context, log *slog.Logger, sel config.Selection, in authority.Intent, installation int64) (sub Result, isBranch bool, err error) {
	branch, isBranch := strings.CutPrefix(in.Ref, "refs/heads/")
	if !isBranch {
		branch = ""
	}
	// A command's commit comes with no list of changed files: unknown, so a barrier wherever a
	// scope has barrier-paths.
	err = a.Accept(ctx, log, []config.Selection{sel}, in, nil, branch, installation, &sub)
	return sub, isBranch, err
}

// NamedScope selects scope of the environment named env (rollback and unfreeze of ENV/SCOPE): the
// configuration must build that scope from repo. The trusted configuration decides which
// repository builds a scope (a repository's own file cannot add one), so a pull request can act
// only on scopes its repository feeds, and the commenter needs write permission on it.
func NamedScope(cfg *config.Config, repo RepoRef, env, scope string) ([]config.Selection, string) {
	e, ok := cfg.Environment(env)
	if !ok {
		return nil, fmt.Sprintf("%s is not an environment of %s.", Quote(env), config.Path)
	}
	for _, s := range e.Scopes {
		if s.Name == scope && s.FedBy(repo.String()) {
			return []config.Selection{{Environment: env, Policy: e.Policy, Scopes: []config.Scope{s}}}, ""
		}
	}
	return nil, fmt.Sprintf("%s/%s is not built from %s in %s, so a pull request of %s cannot act on it.", env, Quote(scope), repo, config.Path, repo)
}

// IsCommitSha reports whether s is a full or abbreviated commit sha: 7 to 40 hexadecimal digits.
func IsCommitSha(s string) bool {
	if len(s) < 7 || len(s) > 40 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return false
		}
	}
	return true
}

// Quote shows untrusted text in a reply: cut short and quoted, so it cannot format or mention.
func Quote(s string) string {
	const max = 40
	r := []rune(s)
	if len(r) > max {
		s = string(r[:max]) + "..."
	}
	return "`" + strings.ReplaceAll(fmt.Sprintf("%q", s), "`", "'") + "`"
}
