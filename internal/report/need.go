package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Needs, in the order a reader of a large environment looks at them: what is stuck or behind
// first, then what failed or is held by someone's decision, then what is on its way, then what is
// settled.
const (
	NeedStuck = iota
	NeedBehind
	NeedError   // a terminal failure, or a head that blocks the scope
	NeedHeld    // frozen by a rollback, or waiting for another environment
	NeedPending // on its way
	NeedNone    // settled
)

var needNames = [...]string{NeedStuck: "stuck", NeedBehind: "behind", NeedError: "failed", NeedHeld: "held", NeedPending: "pending", NeedNone: "settled"}

// Need is how urgently the row asks for a look (NeedStuck first, NeedNone last).
func (r Row) Need() int {
	switch {
	case r.Convergence.State == authority.ConvergenceStuck:
		return NeedStuck
	case r.Convergence.State == authority.ConvergenceBehind:
		return NeedBehind
	case r.Blocked != "" || (r.Failure != nil && r.Head() == nil):
		return NeedError
	case r.Frozen != "" || r.Promotion != "" || r.Approval != "":
		return NeedHeld
	case r.Head() != nil:
		return NeedPending
	}
	return NeedNone
}

// ByNeed is the rows ordered by Need, then by scope name: what is behind first.
func (st *Status) ByNeed() []Row {
	rows := slices.Clone(st.Rows)
	slices.SortStableFunc(rows, func(a, b Row) int { return a.Need() - b.Need() })
	return rows
}

// DefaultStatusRows is how many scopes StatusText lists before it summarises the rest.
const DefaultStatusRows = 40

// StatusTextRows is StatusText for an environment of any size: with more than rows scopes (rows
// > 0), it lists them by need (ByNeed), the first rows of them, and says in one line how many more
// there are in each state, and how to list them all.
func StatusTextRows(w io.Writer, e *authority.Env, now time.Time, rows int) error {
	return StatusTextRowsWith(w, e, now, rows, nil)
}

// StatusTextRowsWith is StatusTextRows with the states of the environments e requires (see
// NewStatusWith), so that each row says what its head waits for there.
func StatusTextRowsWith(w io.Writer, e *authority.Env, now time.Time, rows int, required map[string]*authority.Env) error {
	st := NewStatusWith(e, now, required)
	if rows <= 0 || len(st.Rows) <= rows {
		return writeStatusText(w, st)
	}
	ordered := st.ByNeed()
	shown, rest := ordered[:rows], ordered[rows:]
	st.Rows = shown
	if err := writeStatusText(w, st); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "... and %d more scopes (%s), listed by need: latestwins status %s --rows 0 lists every one\n",
		len(rest), countNeeds(rest), Escape(st.Name))
	return err
}

// NeedCounts says how many of the environment's scopes are in each state: "64 scopes: 1 stuck,
// 2 pending, 61 settled".
func (st *Status) NeedCounts() string {
	return fmt.Sprintf("%d scopes: %s", len(st.Rows), countNeeds(st.Rows))
}

func countNeeds(rows []Row) string {
	counts := make([]int, len(needNames))
	for _, r := range rows {
		counts[r.Need()]++
	}
	var parts []string
	for need, n := range counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, needNames[need]))
		}
	}
	return strings.Join(parts, ", ")
}
