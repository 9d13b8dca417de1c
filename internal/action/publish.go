package action

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/report"
)

// publishTimeout bounds each publication, so that a slow GitHub never holds the step (or the
// completion of an interrupted one) for long.
const publishTimeout = 20 * time.Second

// Permissions a publication needs, named in the warning when GitHub refuses it.
const (
	permComments = "pull-requests: write"
	permChecks   = "checks: write"
)

// publishers returns what publishes comments and check runs: the Deps' when set, otherwise one
// REST client built from the github-token input and GITHUB_API_URL (once per step).
func (s *step) publishers(ctx context.Context) (Commenter, CheckRunner, error) {
	if s.deps.Comments != nil || s.deps.Checks != nil {
		return s.deps.Comments, s.deps.Checks, nil
	}
	if s.gitHub == nil {
		c, err := githubapp.NewTokenClient(ctx, s.gh.APIURL, s.in.token)
		if err != nil {
			return nil, nil, err
		}
		s.gitHub = c
	}
	return s.gitHub, s.gitHub, nil
}

// publish writes the sticky pull request comment and the check run for how the step ended. Each is
// rendered from the environment as read from the store just before it is written, never from this
// step's view. A failed publication is a warning: it never changes how the step ends.
func (s *step) publish(ctx context.Context, res *result) {
	if s.in.command == cmdStatus {
		return
	}
	if res.generation == 0 {
		return // no pass yet (bad input before the claim): the error annotation says what to fix
	}
	comment, check := s.in.comment && s.ev.pr > 0, s.in.checkRun
	switch res.outcome {
	case "", "error", report.OutcomeIdle:
		// Nothing happened to the pass (or the store did not answer): nothing new to show.
		return
	case report.OutcomeAuthorized:
		comment = false // an intermediate gate: the comment shows the claim and the end
	case report.OutcomeClaimed:
		check = false // the check run starts at the gate
	}
	if comment {
		s.publishComment(ctx, res)
	}
	if check {
		s.publishCheck(ctx, res)
	}
}

// passOf describes this step's pass for a publication.
func (s *step) passOf(res *result) report.Pass {
	scopes := res.scopes
	if len(scopes) == 0 {
		scopes = s.in.scopes
	}
	p := report.Pass{Generation: res.generation, Scopes: scopes, Sha: firstNonEmpty(res.sha, s.intent().Sha), Phase: res.phase,
		RunURL: s.runURL(), Outcome: res.outcome}
	if res.superseded != nil {
		p.By, p.BySha = res.superseded.By, res.superseded.BySha
	}
	switch res.outcome {
	case report.OutcomeRetry, report.OutcomeFailed, report.OutcomeLost, report.OutcomeLocked, report.OutcomeInterrupted, report.OutcomeInvalid:
		p.Detail = res.headline
	}
	return p
}

// publication reads the environment's current state for a publication.
func (s *step) publication(ctx context.Context, res *result) (report.Publication, error) {
	e, err := s.view.Status(ctx, s.in.environment)
	if err != nil {
		return report.Publication{}, err
	}
	return report.Publication{Env: e, Required: s.required(ctx, e), Now: s.view.Now(), Pass: s.passOf(res)}, nil
}

// required reads the states of the environments e requires, so that the status says what a head
// waits for there; nil when e requires nothing or one of them cannot be read (then nothing is
// said). An environment nothing was accepted in has nothing live: a nil entry.
func (s *step) required(ctx context.Context, e *authority.Env) map[string]*authority.Env {
	if e.Requires == nil {
		return nil
	}
	out := map[string]*authority.Env{}
	for _, name := range e.Requires.Environments {
		re, err := s.view.Status(ctx, name)
		var input *authority.InputError
		switch {
		case errors.As(err, &input):
			out[name] = nil
		case err != nil:
			s.a.Infof("the status does not say what waits for %s: %v", name, err)
			return nil
		default:
			out[name] = re
		}
	}
	return out
}

func (s *step) publishComment(ctx context.Context, res *result) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	what := fmt.Sprintf("the pull request comment for %s on #%d", s.in.environment, s.ev.pr)
	commenter, _, err := s.publishers(ctx)
	if err != nil {
		s.a.Warningf("could not publish %s: %v; the deploy is not affected", what, err)
		return
	}
	if commenter == nil {
		return
	}
	owner, repo := s.gh.Repo()
	p, err := s.publication(ctx, res)
	if err != nil {
		s.a.Warningf("could not publish %s: reading the store: %v; the deploy is not affected", what, err)
		return
	}
	var b bytes.Buffer
	if err := report.Comment(&b, p); err != nil {
		s.a.Warningf("could not render %s: %v", what, err)
		return
	}
	if _, err := commenter.UpsertComment(ctx, owner, repo, s.ev.pr, report.CommentMarker(s.in.environment), b.String()); err != nil {
		s.a.Warningf("could not publish %s: %v%s", what, err, permissionHint(err, permComments))
		return
	}
	s.a.Infof("published %s", what)
}

func (s *step) publishCheck(ctx context.Context, res *result) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	sha := firstNonEmpty(res.sha, s.intent().Sha) // a claimed generation's commit, which may not be the run's
	name := report.CheckRunName(s.in.environment)
	what := fmt.Sprintf("the check run %q on %s", name, report.ShortSha(sha))
	if sha == "" {
		s.a.Infof("no check run: the pass has no commit (set the sha input)")
		return
	}
	_, checker, err := s.publishers(ctx)
	if err != nil {
		s.a.Warningf("could not publish %s: %v; the deploy is not affected", what, err)
		return
	}
	if checker == nil {
		return
	}
	owner, repo := s.gh.Repo()
	p, err := s.publication(ctx, res)
	if err != nil {
		s.a.Warningf("could not publish %s: reading the store: %v; the deploy is not affected", what, err)
		return
	}
	c := report.CheckRun(p)
	run := githubapp.CheckRun{Status: c.Status, Conclusion: c.Conclusion, Title: c.Title, Summary: c.Summary, DetailsURL: s.runURL()}
	if _, err := checker.UpsertCheckRun(ctx, owner, repo, sha, name, run); err != nil {
		s.a.Warningf("could not publish %s: %v%s", what, err, permissionHint(err, permChecks))
		return
	}
	s.a.Infof("published %s: %s", what, c.Title)
}

// permissionHint names the permission the job lacks when GitHub refused a publication for it, and
// otherwise says that the deploy is not affected.
func permissionHint(err error, perm string) string {
	var resp *github.ErrorResponse
	var limited *githubapp.RateLimitedError
	switch {
	case errors.As(err, &limited):
		return "; the deploy is not affected"
	case errors.As(err, &resp) && resp.Response != nil &&
		(resp.Response.StatusCode == http.StatusForbidden || resp.Response.StatusCode == http.StatusNotFound):
		return fmt.Sprintf("; the token lacks the permission: add `permissions: %s` to the job (a pull request from a fork gets a read-only token); the deploy is not affected", perm)
	}
	return "; the deploy is not affected"
}
