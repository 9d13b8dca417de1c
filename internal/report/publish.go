package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// DefaultPublicationEvents is how many of the newest timeline events a PR comment or check run shows.
const DefaultPublicationEvents = 5

// Outcomes of a step, as the Action's outcome output names them. Publications say what the step
// did in these terms; everything else they show comes from the store.
const (
	OutcomeClaimed     = "claimed"
	OutcomeAuthorized  = "authorized"
	OutcomeDeployed    = "deployed"
	OutcomeSuperseded  = "superseded"
	OutcomeIdle        = "idle"
	OutcomeLocked      = "locked"
	OutcomeRetry       = "retry"
	OutcomeFailed      = "failed"
	OutcomeLost        = "lost"
	OutcomeInterrupted = "interrupted"
	OutcomeInvalid     = "invalid"
)

// Publication is what a PR comment or a check run shows: the environment as read from the store
// just before writing, and the pass of the run that writes it.
type Publication struct {
	Env *authority.Env
	// Required is the states of the environments Env requires, by name, so that a row whose head
	// waits for one says so (NewStatusWith); nil: not known.
	Required map[string]*authority.Env
	Now      time.Time
	Pass     Pass
	// Events is how many of the newest timeline events to show (0: DefaultPublicationEvents).
	Events int
}

// Pass is the run that publishes: its generation, scopes and commit, and how its step ended.
type Pass struct {
	Generation int64
	Scopes     []string
	Sha        string
	Phase      string // the phase entered (authorized only)
	RunURL     string // the workflow run, linked from the publication
	Outcome    string // one of the Outcome constants
	// Detail is one sentence about what the step did, e.g. "Attempt 1 of 3 failed; re-run the job
	// to retry." Optional.
	Detail string
	// By and BySha name what superseded the pass as the step saw it; the store's current state wins
	// when it knows a newer one.
	By    int64
	BySha string
}

// CommentMarker is the hidden marker that finds an environment's sticky comment on a pull request.
func CommentMarker(env string) string {
	return fmt.Sprintf("<!-- latestwins:comment env=%s -->", env)
}

// CheckRunName is the name of an environment's check run on a commit.
func CheckRunName(env string) string { return "latestwins / " + env }

// Superseder returns the newest generation, and its commit when the store knows it, that is pending,
// live or owning any of scopes and newer than gen; 0 when the pass is still the newest.
func Superseder(e *authority.Env, gen int64, scopes []string) (int64, string) {
	var by int64
	var sha string
	consider := func(g int64, s string) {
		if g > by || (g == by && sha == "" && s != "") {
			by, sha = g, s
		}
	}
	for _, name := range scopes {
		sc := e.Scopes[name]
		if sc == nil {
			continue
		}
		if m := sc.Mailbox; m != nil && m.Generation > gen {
			consider(m.Generation, m.Sha)
		}
		if l := sc.Live; l != nil && l.Generation > gen {
			consider(l.Generation, l.Sha)
		}
		if sc.Owner > gen {
			consider(sc.Owner, "")
		}
	}
	return by, sha
}

// superseder is Superseder, falling back to what the step saw.
func (p Publication) superseder() (int64, string) {
	by, sha := Superseder(p.Env, p.Pass.Generation, p.Pass.Scopes)
	if by == 0 || (by == p.Pass.By && sha == "") {
		return p.Pass.By, p.Pass.BySha
	}
	return by, sha
}

// Comment writes the sticky pull request comment: the marker, a heading, what this run did, the
// environment's observed/desired generation, its status table and a timeline excerpt.
func Comment(w io.Writer, p Publication) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n### latestwins: %s\n\n", CommentMarker(p.Env.Name), cell(p.Env.Name))
	p.writeBody(&b)
	fmt.Fprintf(&b, "\n<sub>Rendered from the latestwins store at %s UTC; updated in place by every run of this pull request.</sub>\n",
		p.Now.UTC().Format("2006-01-02 15:04:05"))
	_, err := io.WriteString(w, b.String())
	return err
}

// Check is a check run's state and output.
type Check struct {
	Status     string // in_progress or completed
	Conclusion string // success, neutral or failure; empty while in progress
	Title      string
	Summary    string // Markdown
}

// CheckRun renders the check run of a pass. Its status follows what users rely on: success when
// the pass deployed; neutral ("Superseded by generation N (sha)") when a newer intent took over, so
// a superseded run is grey, not red; failure only for a terminal error (the final attempt failed, or
// the input is invalid); and in progress while the work is pending, including after a retryable end
// (a non-final attempt failed, the lease was lost, the wait for a lease ran out, a signal stopped
// it), because the intent stays in the mailbox and the next attempt updates the same check run.
func CheckRun(p Publication) Check {
	gen := p.Pass.Generation
	c := Check{Status: "in_progress"}
	switch p.Pass.Outcome {
	case OutcomeDeployed:
		c.Status, c.Conclusion = "completed", "success"
		c.Title = fmt.Sprintf("Deployed generation %d%s", gen, shaParen(p.Pass.Sha))
	case OutcomeSuperseded:
		by, sha := p.superseder()
		c.Status, c.Conclusion = "completed", "neutral"
		c.Title = fmt.Sprintf("Superseded by generation %d%s", by, shaParen(sha))
	case OutcomeFailed:
		c.Status, c.Conclusion = "completed", "failure"
		c.Title = fmt.Sprintf("Generation %d failed on its final attempt", gen)
	case OutcomeInvalid:
		c.Status, c.Conclusion = "completed", "failure"
		c.Title = "Invalid configuration or input"
	case OutcomeAuthorized:
		c.Title = fmt.Sprintf("Generation %d: %s in progress", gen, firstNonEmpty(p.Pass.Phase, "deploy"))
	case OutcomeRetry:
		c.Title = fmt.Sprintf("Generation %d: the attempt failed; will retry", gen)
	case OutcomeLost:
		c.Title = fmt.Sprintf("Generation %d: lease lost; will retry", gen)
	case OutcomeLocked:
		c.Title = fmt.Sprintf("Generation %d: gave up waiting for the lease; will retry", gen)
	case OutcomeInterrupted:
		c.Title = fmt.Sprintf("Generation %d: interrupted; will retry", gen)
	default:
		c.Title = fmt.Sprintf("Generation %d: %s", gen, firstNonEmpty(p.Pass.Outcome, "in progress"))
	}
	var b strings.Builder
	p.writeBody(&b)
	c.Summary = b.String()
	return c
}

// writeBody writes what the comment and the check run share: this run's line, observed/desired,
// the status table and the timeline excerpt.
func (p Publication) writeBody(b *strings.Builder) {
	e := p.Env
	b.WriteString(p.runLine())
	b.WriteString("\n\n")
	st := NewStatusWith(e, p.Now, p.Required)
	writeStatusLine(b, st)
	writeStatusTable(b, st)
	n := p.Events
	if n <= 0 {
		n = DefaultPublicationEvents
	}
	events := e.Events
	if len(events) > n {
		events = events[len(events)-n:]
	}
	if len(events) > 0 {
		fmt.Fprintf(b, "\n<details><summary>Timeline (newest %d of %d kept)</summary>\n\n", len(events), len(e.Events))
		writeTimelineTable(b, events)
		b.WriteString("\n</details>\n")
	}
}

// runLine says what this run did, in one paragraph.
func (p Publication) runLine() string {
	ps := p.Pass
	this := fmt.Sprintf("generation %d%s", ps.Generation, codeParen(ps.Sha))
	if ps.RunURL != "" {
		this = fmt.Sprintf("[generation %d](%s)%s", ps.Generation, ps.RunURL, codeParen(ps.Sha))
	}
	scopes := cell(strings.Join(ps.Scopes, ", "))
	if scopes == "" {
		scopes = "no scope"
	}
	var line string
	switch ps.Outcome {
	case OutcomeDeployed:
		line = fmt.Sprintf("**Deployed**: %s deployed %s.", this, scopes)
		if by, sha := Superseder(p.Env, ps.Generation, ps.Scopes); by > 0 {
			line += fmt.Sprintf(" Superseded since by generation %d%s.", by, shaParen(sha))
		}
	case OutcomeSuperseded:
		by, sha := p.superseder()
		line = fmt.Sprintf("**Superseded by generation %d%s**: %s stopped cleanly and deployed nothing; the newer run deploys.", by, shaParen(sha), this)
	case OutcomeClaimed:
		line = fmt.Sprintf("**Pending**: %s claimed %s.", this, scopes)
	case OutcomeAuthorized:
		line = fmt.Sprintf("**In progress**: %s entered %s for %s.", this, firstNonEmpty(ps.Phase, "deploy"), scopes)
	case OutcomeFailed:
		line = fmt.Sprintf("**Failed**: %s failed on its final attempt; the error is recorded.", this)
	case OutcomeInvalid:
		line = fmt.Sprintf("**Invalid configuration or input**: %s stopped.", this)
	case OutcomeRetry, OutcomeLost, OutcomeLocked, OutcomeInterrupted:
		line = fmt.Sprintf("**Will retry**: %s did not finish (%s); nothing terminal was published.", this, ps.Outcome)
	default:
		line = fmt.Sprintf("**%s**: %s.", cell(firstNonEmpty(ps.Outcome, "status")), this)
	}
	if ps.Detail != "" {
		line += " " + cell(oneLine(ps.Detail, 300))
	}
	return line
}

func shaParen(sha string) string {
	if sha == "" {
		return ""
	}
	return " (" + ShortSha(sha) + ")"
}

func codeParen(sha string) string {
	if sha == "" {
		return ""
	}
	return " (" + code(ShortSha(sha)) + ")"
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
