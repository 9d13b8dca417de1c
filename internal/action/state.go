package action

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// state is what the steps of one job share about their pass, in a file under RUNNER_TEMP (one per
// environment), so that the generation and tokens need not be threaded by hand.
type state struct {
	Environment string `json:"environment"`
	Intent      string `json:"intent"`
	Generation  int64  `json:"generation"`
	Sha         string `json:"sha,omitempty"` // the commit the pass deploys
	// Commits are the commits the pass deploys, per claimed scope, for its command
	// (pass.CommitEnv): the scopes of one pass may deploy different commits.
	Commits   []authority.ClaimedScope `json:"commits,omitempty"`
	Scopes    []string                 `json:"scopes"`
	Holder    string                   `json:"holder,omitempty"`
	Tokens    map[string]int64         `json:"tokens,omitempty"`
	ExpiresAt time.Time                `json:"expires_at,omitzero"`
}

// statePath is the job's state file for the environment; "" without RUNNER_TEMP.
func (s *step) statePath() string {
	dir := s.a.Getenv("RUNNER_TEMP")
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "latestwins", url.PathEscape(s.in.environment)+".json")
}

func (s *step) loadState() (*state, error) {
	p := s.statePath()
	if p == "" {
		return &state{}, nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return &state{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the job's latestwins state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, &authority.InputError{Field: "state file", Value: p, Fix: fmt.Sprintf("it is not valid JSON (%v); delete it to start a new pass", err)}
	}
	if st.Environment != s.in.environment || st.Intent != s.intent().ID {
		// Another environment's or another run's pass (a self-hosted runner may keep its temp dir).
		return &state{}, nil
	}
	return &st, nil
}

func (s *step) saveState(st *state) error {
	p := s.statePath()
	if p == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("write the job's latestwins state: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write the job's latestwins state: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write the job's latestwins state: %w", err)
	}
	return nil
}
