package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/pass"
)

// claimIntent accepts and claims an intent a workload sent, stripped of what only GitHub may say
// (see the claim verb). With App credentials the App asks GitHub, as its installation on the
// token's repository, how the commit relates to what each scope holds (the compare API: behind is
// older, recorded as arrived out of order; the live commit is compared whatever branch deployed it)
// and which files changed since the scope's live commit, which decide its barriers by the trusted
// configuration's barrier-paths. Without credentials, or where the App is not installed, the claim
// is taken as it arrives and is a barrier nowhere.
func (p *server) claimIntent(ctx context.Context, wl *Workload, in authority.Intent, trusted *config.Environment, opts ...authority.AcceptOption) (*authority.AcceptResult, error) {
	log := p.app.Log.With("api", "claim", "environment", in.Environment, "repo", wl.Repository, "actor", wl.Actor, "intent", in.ID)
	gh, err := p.askGitHub(ctx, log, wl)
	if err != nil {
		return nil, err
	}
	if gh != nil {
		opts = append(opts, authority.WithComparer(gh), authority.CompareLive(), authority.WithBarriers(gh.barriers(trusted, in.Sha)))
	}
	return pass.Claim(ctx, p.app.Auth, in, opts...)
}

// askGitHub is GitHub as the App's installation on the workload's repository, or nil when it
// cannot be asked: no App credentials, or no installation there (logged).
func (p *server) askGitHub(ctx context.Context, log *slog.Logger, wl *Workload) (*claimGitHub, error) {
	a := p.app
	if a.Commits == nil || a.Installations == nil {
		return nil, nil
	}
	repo, err := core.ParseRepo(wl.Repository)
	if err != nil {
		return nil, &TokenError{Reason: err.Error()}
	}
	installation, err := a.Installations.ForRepo(ctx, repo.Owner, repo.Name)
	if errors.Is(err, core.ErrNotInstalled) {
		log.WarnContext(ctx, "the App is not installed on the repository: its claims are taken as they arrive, and are barriers nowhere", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the App's installation on %s: %w", repo, err)
	}
	return &claimGitHub{commits: a.Commits, installation: installation, repo: repo, log: log, seen: map[string]comparison{}}, nil
}

// claimGitHub asks GitHub's compare API about the commits of one claim, each pair once.
type claimGitHub struct {
	commits      core.Commits
	installation int64
	repo         core.RepoRef
	log          *slog.Logger

	mu   sync.Mutex
	seen map[string]comparison // by base...head
}

type comparison struct {
	c   core.Comparison
	err error
}

var _ authority.Comparer = (*claimGitHub)(nil)

// changes compares base with head, once per claim.
func (g *claimGitHub) changes(ctx context.Context, base, head string) (core.Comparison, error) {
	key := base + "..." + head
	g.mu.Lock()
	got, ok := g.seen[key]
	g.mu.Unlock()
	if ok {
		return got.c, got.err
	}
	// Asked while the environment's updates in this process wait (see Authority.Accept): bounded.
	cctx, cancel := context.WithTimeout(ctx, core.CompareTimeout)
	defer cancel()
	got.c, got.err = g.commits.Changes(cctx, g.installation, g.repo, base, head)
	g.mu.Lock()
	g.seen[key] = got
	g.mu.Unlock()
	return got.c, got.err
}

// Compare implements authority.Comparer. An answer GitHub does not give leaves the commits in
// arrival order, with a warning: a claim is never refused for it.
func (g *claimGitHub) Compare(ctx context.Context, _ authority.Intent, base, head string) (authority.CommitOrder, error) {
	c, err := g.changes(ctx, base, head)
	if err != nil {
		g.log.WarnContext(ctx, "GitHub could not order the claim's commit; taking it as it arrives", "base", base, "head", head, "err", err)
		return authority.Diverged, nil
	}
	return c.Order, nil
}

// barriers decides, per scope, whether sha is a barrier there: the scope has barrier-paths in the
// trusted configuration, and the files changed from its live commit to sha touch one of them. What
// GitHub does not tell (nothing live yet, more files than it lists, no answer) counts as touching
// them, the safe side, as for a push whose changes are unknown.
func (g *claimGitHub) barriers(trusted *config.Environment, sha string) authority.BarrierFunc {
	scopes := map[string]config.Scope{}
	for _, s := range trusted.Scopes {
		scopes[s.Name] = s
	}
	return func(ctx context.Context, scope string, live *authority.Live) (bool, error) {
		s, ok := scopes[scope]
		if !ok || len(s.BarrierPaths) == 0 {
			return false, nil
		}
		if live == nil {
			return true, nil
		}
		if live.Sha == sha {
			return false, nil // nothing changed
		}
		c, err := g.changes(ctx, live.Sha, sha)
		switch {
		case err != nil:
			g.log.WarnContext(ctx, "GitHub did not say which files the claim's commit changes; a barrier where the scope has barrier-paths",
				"scope", scope, "base", live.Sha, "head", sha, "err", err)
			return true, nil
		case c.Order == authority.Identical || c.Order == authority.Behind:
			return false, nil // no change of its own: the same commit, or an older one
		case c.Files == nil:
			return true, nil
		case len(c.Files) == 0:
			return false, nil
		}
		return s.IsBarrier(c.Files), nil
	}
}
